package zkd.testing;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Map;

/**
 * One JVM of the extraction-cache safety test (cache-safety-test.sh, run by build.sh as root
 * against a second local user): starts a {@link ZkdTestingServer} on the binary
 * {@link ZkdBinary#find()} names, as a project's test would, and prints {@code binary <path>},
 * then {@code stat <uid> <mode in octal> <path>} for the binary and each folder above it up to
 * {@code /} (read while the JVM runs, since a private copy is removed at exit, without
 * following links), and {@code served <host:port>}; exits non-zero on any failure.
 */
public final class ZkdCacheProbe {
    private ZkdCacheProbe() {}

    public static void main(String[] args) throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            Path binary = ZkdBinary.find();
            System.out.println("binary " + binary);
            for (Path p = binary; p != null; p = p.getParent()) {
                Map<String, Object> a = Files.readAttributes(p, "unix:mode,uid", LinkOption.NOFOLLOW_LINKS);
                System.out.printf("stat %d %o %s%n", (Integer) a.get("uid"), (Integer) a.get("mode"), p);
            }
            System.out.println("served " + server.getConnectString());
        }
    }
}
