package zkd.testing;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/** Finds the {@code zkd} executable. */
public final class ZkdBinary {
    /** System property naming the binary. */
    public static final String PROPERTY = "zkd.binary";
    /** Environment variable naming the binary. */
    public static final String ENV = "ZKD_BINARY";

    private ZkdBinary() {}

    /**
     * The binary to run: the {@code zkd.binary} system property, else the {@code ZKD_BINARY}
     * environment variable, else {@code zkd} on the {@code PATH}.
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
        throw new IllegalStateException("cannot find the zkd binary: set -D" + PROPERTY
                + "=/path/to/zkd or " + ENV + ", or put zkd on PATH (cargo install --path cli)");
    }

    private static Path checked(Path p, String where) {
        if (!Files.isRegularFile(p) || !Files.isExecutable(p)) {
            throw new IllegalStateException(where + " names " + p + ", which is not an executable file");
        }
        return p;
    }
}
