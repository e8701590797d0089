package zkd.testing;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;

/**
 * One JVM of the concurrent-extraction test (run by build.sh, several at once): finds the
 * binary with {@link ZkdBinary#find()}, starts a {@link ZkdTestingServer} on it and round-trips
 * a znode through Curator. Prints {@code binary <path>} and {@code served <path>}; exits 1 on
 * any failure.
 */
public final class ZkdBinaryProbe {
    private ZkdBinaryProbe() {}

    public static void main(String[] args) throws Exception {
        Path binary = ZkdBinary.find();
        System.out.println("binary " + binary);
        try (ZkdTestingServer server = new ZkdTestingServer();
                CuratorFramework client = CuratorFrameworkFactory.newClient(server.getConnectString(),
                        new RetryOneTime(100))) {
            client.start();
            String path = "/probe-" + ProcessHandle.current().pid();
            client.create().forPath(path, "hello".getBytes(StandardCharsets.UTF_8));
            String read = new String(client.getData().forPath(path), StandardCharsets.UTF_8);
            if (!read.equals("hello")) {
                throw new AssertionError("read back " + read);
            }
            System.out.println("served " + path);
        }
    }
}
