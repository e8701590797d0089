package zkd.testing;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributeView;
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
     * written to a temporary file, made read-only (0500), checked, and renamed into place, so
     * no JVM ever sees half a file).
     *
     * <p>The cache is used only when no other local user can change it: every folder from
     * {@code /} down to the cache root is owned by this user or root and writable by no one
     * else unless sticky (as {@code /tmp}); {@code zkd-testing/} and the version's folder are
     * this user's (made with mode 0700) and writable by no one else; no symbolic link is
     * followed inside them. Otherwise (another user's folder, a link, a shared folder) a
     * warning names the reason and the binary is extracted to a new folder of
     * {@code java.io.tmpdir} only this user can enter, for this JVM alone, removed at exit.
     * So the file whose hash was checked is the file that runs: no one else can swap it.
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

    /**
     * Extracts to the shared cache when every folder on its way is safe (see
     * {@link PrivateFolders#trustedFolder}), else to a fresh private folder for this JVM.
     */
    private static Path extract(String expected) throws IOException {
        PrivateFolders folders = PrivateFolders.forThisProcess();
        Path base = cacheBase();
        String refusal;
        try {
            Path root = folders.ownFolder(folders.trustedFolder(base), "zkd-testing");
            Path dir = folders.ownFolder(root, version() + "-" + expected.substring(0, 16));
            return extractShared(folders, dir, expected);
        } catch (IOException e) {
            refusal = e instanceof PrivateFolders.UnsafeException ? e.getMessage() : e.toString();
        }
        LOG.log(System.Logger.Level.WARNING, "zkd-testing: not using the cache in " + base
                + " for the bundled zkd binary: " + refusal + "; extracting it to a private folder for this JVM");
        Path tmp = Paths.get(System.getProperty("java.io.tmpdir"));
        Path dir;
        try {
            dir = folders.freshFolder(folders.trustedFolder(tmp), "zkd-testing-bin-");
        } catch (IOException e) {
            throw new IOException("neither the cache in " + base + " (" + refusal + ") nor java.io.tmpdir " + tmp
                    + " (" + e.getMessage() + ") is safe from other users; set -D" + PROPERTY
                    + "=/path/to/zkd or " + ENV, e);
        }
        // Deleted at exit in the reverse order of these calls: the file, then its folder.
        dir.toFile().deleteOnExit();
        Path target = dir.resolve("zkd");
        target.toFile().deleteOnExit();
        Files.createFile(target, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        fill(folders, target, expected);
        LOG.log(System.Logger.Level.INFO, "zkd-testing: extracted the bundled zkd binary to " + target
                + " (this JVM's alone, removed at exit)");
        return target;
    }

    /**
     * Extracts to {@code dir}, a folder of the cache only this user can write, unless an intact
     * copy is there. JVMs take turns through {@code .lock} (opened without following a link).
     */
    private static Path extractShared(PrivateFolders folders, Path dir, String expected) throws IOException {
        Path target = dir.resolve("zkd");
        if (intact(folders, target, expected)) {
            return target;
        }
        Path lockPath = dir.resolve(".lock");
        // Closing the channel releases the lock.
        try (FileChannel lockFile = FileChannel.open(lockPath, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS)) {
            folders.checkOwnFile(lockPath);
            lockFile.lock();
            // Another JVM may have extracted it while this one waited for the lock.
            if (intact(folders, target, expected)) {
                return target;
            }
            Path tmp = Files.createTempFile(dir, "zkd-", ".part");
            try {
                fill(folders, tmp, expected);
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

    /**
     * Writes the jar's binary into {@code file} (this user's, new, in a folder no one else can
     * write), makes it read-only and runnable by its owner (0500), and checks its SHA-256 after.
     */
    private static void fill(PrivateFolders folders, Path file, String expected) throws IOException {
        String got;
        try (InputStream in = ZkdBinary.class.getResourceAsStream(RESOURCE_DIR + "zkd");
                OutputStream out = Files.newOutputStream(file, StandardOpenOption.WRITE,
                        StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
            if (in == null) {
                throw new IOException("the jar records a hash for " + RESOURCE_DIR + "zkd but not the file");
            }
            got = copyHashing(in, out);
        }
        if (!got.equals(expected)) {
            throw new IOException("the binary in the jar has SHA-256 " + got + ", but the jar records "
                    + expected + " (a damaged jar)");
        }
        Files.getFileAttributeView(file, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                .setPermissions(PosixFilePermissions.fromString("r-x------"));
        if (!intact(folders, file, expected)) {
            throw new IOException(file + " changed while it was written");
        }
    }

    /**
     * Whether {@code file} is a regular file this user owns and no one else may write, runnable,
     * with the SHA-256 {@code expected}; links are not followed.
     */
    private static boolean intact(PrivateFolders folders, Path file, String expected) throws IOException {
        if (!folders.isOwnExecutable(file)) {
            return false;
        }
        try (InputStream in = Files.newInputStream(file, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
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

    /** {@code $XDG_CACHE_HOME} when it is an absolute path, else {@code ~/.cache}. */
    private static Path cacheBase() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        if (xdg != null && !xdg.isEmpty() && Paths.get(xdg).isAbsolute()) {
            return Paths.get(xdg);
        }
        return Paths.get(System.getProperty("user.home"), ".cache");
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
