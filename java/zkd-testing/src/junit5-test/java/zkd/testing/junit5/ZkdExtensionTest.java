package zkd.testing.junit5;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;

import zkd.testing.ZkdTestingServer;

/** The extension's server is shared by the run and wiped between tests. */
@ExtendWith(ZkdExtension.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ZkdExtensionTest {
    private static ZkdTestingServer first;
    private static long firstSession;

    private static ZooKeeper connect(ZkdTestingServer server) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(server.getConnectString(), 10_000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        assertTrue(connected.await(30, TimeUnit.SECONDS), "no connection to " + server);
        return zk;
    }

    @Test
    @Order(1)
    void leavesNodesAndASessionBehind(ZkdTestingServer server) throws Exception {
        first = server;
        assertTrue(server.isRunning());
        ZooKeeper zk = connect(server);
        firstSession = zk.getSessionId();
        zk.create("/left-over", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        // deliberately not closed: the wipe expires the session
    }

    @Test
    @Order(2)
    void seesAWipedServer(ZkdTestingServer server) throws Exception {
        assertSame(first, server, "one server for the run");
        try (ZooKeeper zk = connect(server)) {
            assertNull(zk.exists("/left-over", false), "the previous test's node survived");
            assertEquals(List.of("zookeeper"), zk.getChildren("/", false));
            assertTrue(!server.sessionsJson().contains(Long.toHexString(firstSession)),
                    "the previous test's session survived: " + server.sessionsJson());
        }
    }
}
