package zkd.testing;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Locale;

/**
 * Finds the {@code zkd} executable: the {@code zkd.binary} system property, the
 * {@code ZKD_BINARY} environment variable, {@code zkd} on the {@code PATH}, and otherwise the
 * binary this jar carries, extracted once per version to a per-user cache.
 */
public final class ZkdBinary {
    /** System property naming the binary. */
    public static final String PROPERTY = "zkd.binary";
    /** Environment variable naming the binary. */
    public static final String ENV = "ZKD_BINARY";
    /** The platform whose binary a release jar carries ({@code os-arch}). */
    public static final String BUNDLED_PLATFORM = "linux-x86_64";

    private static final String RESOURCE_DIR = "/zkd/testing/bin/" + BUNDLED_PLATFORM + "/";
    private static final System.Logger LOG = System.getLogger(ZkdBinary.class.getName());
    private static final Object EXTRACT_LOCK = new Object();
    private static volatile Path extracted;

    private ZkdBinary() {}

    /**
     * The binary to run: the {@code zkd.binary} system property, else the {@code ZKD_BINARY}
     * environment variable, else {@code zkd} on the {@code PATH}, else the binary carried in
     * this jar (see {@link #bundled()}).
     *
     * @throws IllegalStateException when none names an executable file
     */
    public static Path find() {
        String prop = System.getProperty(PROPERTY);
        if (prop != null && !prop.isEmpty()) {
            return checked(Paths.get(prop), "system property " + PROPERTY);
        }
        String env = System.getenv(ENV);
        if (env != null && !env.isEmpty()) {
            return checked(Paths.get(env), "environment variable " + ENV);
        }
        String path = System.getenv("PATH");
        if (path != null) {
            String exe = System.getProperty("os.name", "").startsWith("Windows") ? "zkd.exe" : "zkd";
            for (String dir : path.split(File.pathSeparator)) {
                if (dir.isEmpty()) {
                    continue;
                }
                Path candidate = Paths.get(dir, exe);
                if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
                    return candidate;
                }
            }
        }
        return bundled();
    }

    /**
     * The binary carried in this jar, extracted to
     * {@code $XDG_CACHE_HOME/zkd-testing/<version>-<hash>/zkd} (default {@code ~/.cache}) the
     * first time and reused after: its SHA-256 is checked against the one recorded in the jar
     * before it is used, a damaged copy is replaced, and JVMs starting at the same time take
     * turns through a lock file, so one extracts and the others reuse its copy (each copy is
     * written to a temporary file and renamed into place, so no JVM ever sees half a file).
     *
     * @throws IllegalStateException when the jar carries no binary for this platform, or it
     *     cannot be extracted
     */
    public static Path bundled() {
        Path done = extracted;
        if (done != null) {
            return done;
        }
        String platform = platform();
        String expected = resourceText(RESOURCE_DIR + "zkd.sha256");
        if (!BUNDLED_PLATFORM.equals(platform) || expected == null) {
            throw new IllegalStateException("cannot find the zkd binary: set -D" + PROPERTY
                    + "=/path/to/zkd or " + ENV + ", or put zkd on PATH"
                    + (expected == null
                            ? " (this build of zkd-testing carries no binary; the release jar carries one for "
                                    + BUNDLED_PLATFORM + ")"
                            : " (this jar carries a binary for " + BUNDLED_PLATFORM + " only, and this is "
                                    + platform + ")"));
        }
        expected = expected.trim().toLowerCase(Locale.ROOT);
        if (!expected.matches("[0-9a-f]{64}")) {
            throw new IllegalStateException("the jar's " + RESOURCE_DIR + "zkd.sha256 is not a SHA-256 (a damaged jar)");
        }
        synchronized (EXTRACT_LOCK) {
            if (extracted == null) {
                try {
                    extracted = extract(expected);
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot extract the zkd binary this jar carries: " + e, e);
                }
            }
            return extracted;
        }
    }

    /** This JVM's platform as {@code os-arch}, in the names the jar's resources use. */
    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (os.startsWith("linux")) {
            os = "linux";
        } else if (os.startsWith("mac")) {
            os = "macos";
        } else if (os.startsWith("windows")) {
            os = "windows";
        }
        if (arch.equals("amd64") || arch.equals("x86_64")) {
            arch = "x86_64";
        } else if (arch.equals("arm64")) {
            arch = "aarch64";
        }
        return os + "-" + arch;
    }

    private static Path extract(String expected) throws IOException {
        Path dir = cacheRoot().resolve(version() + "-" + expected.substring(0, 16));
        createPrivateDirectories(dir);
        Path target = dir.resolve("zkd");
        if (intact(target, expected)) {
            return target;
        }
        // Closing the channel releases the lock.
        try (FileChannel lockFile = FileChannel.open(dir.resolve(".lock"),
                StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
            lockFile.lock();
            // Another JVM may have extracted it while this one waited for the lock.
            if (intact(target, expected)) {
                return target;
            }
            Path tmp = Files.createTempFile(dir, "zkd-", ".part");
            try {
                String got;
                try (InputStream in = ZkdBinary.class.getResourceAsStream(RESOURCE_DIR + "zkd");
                        OutputStream out = Files.newOutputStream(tmp)) {
                    if (in == null) {
                        throw new IOException("the jar records a hash for " + RESOURCE_DIR + "zkd but not the file");
                    }
                    got = copyHashing(in, out);
                }
                if (!got.equals(expected)) {
                    throw new IOException("the binary in the jar has SHA-256 " + got + ", but the jar records "
                            + expected + " (a damaged jar)");
                }
                Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx------"));
                try {
                    Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                } catch (AtomicMoveNotSupportedException e) {
                    Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
                }
            } finally {
                Files.deleteIfExists(tmp);
            }
            LOG.log(System.Logger.Level.INFO, "zkd-testing: extracted the bundled zkd binary to " + target);
            return target;
        }
    }

    /** Whether {@code file} is an executable with the SHA-256 {@code expected}. */
    private static boolean intact(Path file, String expected) throws IOException {
        if (!Files.isRegularFile(file) || !Files.isExecutable(file)) {
            return false;
        }
        try (InputStream in = Files.newInputStream(file)) {
            return copyHashing(in, OutputStream.nullOutputStream()).equals(expected);
        }
    }

    private static String copyHashing(InputStream in, OutputStream out) throws IOException {
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JVM has no SHA-256", e);
        }
        byte[] buf = new byte[64 * 1024];
        for (int n; (n = in.read(buf)) > 0; ) {
            sha.update(buf, 0, n);
            out.write(buf, 0, n);
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : sha.digest()) {
            hex.append(String.format("%02x", b));
        }
        return hex.toString();
    }

    private static Path cacheRoot() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isEmpty()
                ? Paths.get(xdg)
                : Paths.get(System.getProperty("user.home"), ".cache");
        return base.resolve("zkd-testing");
    }

    private static void createPrivateDirectories(Path dir) throws IOException {
        if (Files.isDirectory(dir)) {
            return;
        }
        Path parent = dir.getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException e) {
            // Made by another JVM at the same moment.
        }
    }

    private static String version() {
        String v = resourceText(RESOURCE_DIR + "version");
        return v == null ? "unversioned" : v.trim().replaceAll("[^A-Za-z0-9._-]", "_");
    }

    private static String resourceText(String name) {
        try (InputStream in = ZkdBinary.class.getResourceAsStream(name)) {
            return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return null;
        }
    }

    private static Path checked(Path p, String where) {
        if (!Files.isRegularFile(p) || !Files.isExecutable(p)) {
            throw new IllegalStateException(where + " names " + p + ", which is not an executable file");
        }
        return p;
    }
}
