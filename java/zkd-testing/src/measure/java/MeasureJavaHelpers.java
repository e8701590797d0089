import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;

/**
 * One measurement of a Java test helper in a fresh JVM (run by scripts/measure-helpers.sh):
 * {@code zkd} = {@code new ZkdTestingServer()}, {@code curator} = Curator's
 * {@code new TestingServer()}, {@code zkd-cluster} = {@code new ZkdTestingCluster(3)} and
 * {@code start()}, {@code curator-cluster} = Curator's {@code new TestingCluster(3)} and
 * {@code start()}. Times: from constructing the helper until it is up (the constructor or
 * {@code start()} returns), and until a Curator client on its connect string is connected; memory is the growth of this JVM's resident set over the same
 * span plus, for zkd, the resident set of the zkd process. Prints one JSON line.
 */
public final class MeasureJavaHelpers {
    static long rssKib(long pid) throws Exception {
        for (String line : Files.readAllLines(Paths.get("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IllegalStateException("no VmRSS for " + pid);
    }

    static CuratorFramework connect(String connectString) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connectString, 30_000, 30_000, new RetryOneTime(100));
        c.start();
        if (!c.blockUntilConnected(120, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + connectString);
        }
        return c;
    }

    public static void main(String[] args) throws Exception {
        String which = args[0];
        // Load the client classes before the clock starts: both helpers share them.
        Class.forName("org.apache.curator.framework.CuratorFrameworkFactory");
        Class.forName("org.apache.zookeeper.ZooKeeper");
        System.gc();
        long self = ProcessHandle.current().pid();
        long before = rssKib(self);
        long t0 = System.nanoTime();
        AutoCloseable server;
        String connect;
        long child = -1;
        if (which.equals("zkd")) {
            zkd.testing.ZkdTestingServer s = new zkd.testing.ZkdTestingServer();
            server = s;
            connect = s.getConnectString();
            child = s.getPid();
        } else if (which.equals("zkd-cluster")) {
            zkd.testing.ZkdTestingCluster s = new zkd.testing.ZkdTestingCluster(3);
            s.start();
            server = s;
            connect = s.getConnectString();
            child = s.server().getPid();
        } else if (which.equals("curator-cluster")) {
            org.apache.curator.test.TestingCluster s = new org.apache.curator.test.TestingCluster(3);
            s.start();
            server = s;
            connect = s.getConnectString();
        } else if (which.equals("curator")) {
            org.apache.curator.test.TestingServer s = new org.apache.curator.test.TestingServer();
            server = s;
            connect = s.getConnectString();
        } else {
            throw new IllegalArgumentException("unknown helper " + which);
        }
        long startedUs = (System.nanoTime() - t0) / 1000;
        CuratorFramework client = connect(connect);
        long elapsedUs = (System.nanoTime() - t0) / 1000;
        client.create().forPath("/probe", "x".getBytes());
        long jvmGrowth = rssKib(self) - before;
        long childRss = child > 0 ? rssKib(child) : 0;
        client.close();
        server.close();
        System.out.println("{\"helper\":\"" + which + "\",\"started_us\":" + startedUs + ",\"connected_us\":" + elapsedUs
                + ",\"jvm_growth_kib\":" + jvmGrowth + ",\"child_rss_kib\":" + childRss + "}");
        System.exit(0);
    }
}
