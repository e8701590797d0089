package zkd.testing;

import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.CreateMode;

/**
 * Tests of {@link ZkdTestingServer} with Curator against the real zkd binary. Prints one
 * {@code PASS name} / {@code FAIL name: reason} line per test and {@code N passed, M failed}.
 */
public final class ZkdTestingServerTest {
    interface Body {
        void run() throws Exception;
    }

    private static int passed;
    private static int failed;

    public static void main(String[] args) {
        test("leaderLatchHandsOverWhenTheLeaderExpires", ZkdTestingServerTest::leaderLatchExpiry);
        test("restartKeepsPortTreeAndSession", ZkdTestingServerTest::restart);
        test("disconnectKeepsTheSession", ZkdTestingServerTest::disconnect);
        test("resetDeletesTheTree", ZkdTestingServerTest::reset);
        test("manualClockExpiresSessions", ZkdTestingServerTest::manualClock);
        test("pauseHoldsRequestsUntilResume", ZkdTestingServerTest::pause);
        test("faultRuleFailsOneRequest", ZkdTestingServerTest::fault);
        test("protectedCreateSurvivesDropAfter", ZkdTestingServerTest::protectedCreateUnderDropAfter);
        test("droppedReplyWriteIsApplied", ZkdTestingServerTest::droppedReplies);
        test("closeStopsTheProcessAndFreesThePort", ZkdTestingServerTest::close);
        test("adminErrorsCarryStatus", ZkdTestingServerTest::adminErrors);
        test("zookeeperVersionPicksTheRelease", ZkdTestingServerTest::zookeeperVersion);
        finish();
    }

    /** Prints the tally and exits 0 when every test passed. */
    static void finish() {
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    static void test(String name, Body body) {
        try {
            body.run();
            passed++;
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + name + ": " + t);
            t.printStackTrace(System.out);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    /** Polls until true; generous bound, never a timing assertion. */
    static boolean eventually(BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (cond.getAsBoolean()) {
                return true;
            }
            Thread.sleep(20);
        }
        return cond.getAsBoolean();
    }

    /** Polls until {@code path} exists as {@code client} sees it; a failed call counts as not yet. */
    static boolean eventuallyExists(CuratorFramework client, String path) throws InterruptedException {
        return eventually(() -> {
            try {
                return client.checkExists().forPath(path) != null;
            } catch (Exception e) {
                return false;
            }
        });
    }

    private static CuratorFramework curator(ZkdTestingServer server, List<ConnectionState> states) throws Exception {
        return curator(server.getConnectString(), states);
    }

    /** A started Curator client on {@code connectString}, connected; its states go to {@code states}. */
    static CuratorFramework curator(String connectString, List<ConnectionState> states) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connectString)
                .sessionTimeoutMs(10_000)
                .connectionTimeoutMs(10_000)
                .retryPolicy(new RetryOneTime(200))
                .build();
        if (states != null) {
            c.getConnectionStateListenable().addListener((client, state) -> states.add(state));
        }
        c.start();
        check(c.blockUntilConnected(30, TimeUnit.SECONDS), "curator did not connect to " + connectString);
        return c;
    }

    static long sessionOf(CuratorFramework c) throws Exception {
        return c.getZookeeperClient().getZooKeeper().getSessionId();
    }

    static void leaderLatchExpiry() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            List<ConnectionState> statesA = new CopyOnWriteArrayList<>();
            try (CuratorFramework a = curator(server, statesA);
                    CuratorFramework b = curator(server, null);
                    LeaderLatch latchA = new LeaderLatch(a, "/election", "a");
                    LeaderLatch latchB = new LeaderLatch(b, "/election", "b")) {
                latchA.start();
                check(latchA.await(30, TimeUnit.SECONDS), "a did not become leader");
                latchB.start();
                check(eventually(() -> {
                    try {
                        return latchB.getParticipants().size() == 2;
                    } catch (Exception e) {
                        return false;
                    }
                }), "b did not join the election");
                check(!latchB.hasLeadership(), "b leads while a does");

                server.expireSession(sessionOf(a));

                check(latchB.await(30, TimeUnit.SECONDS), "b did not take over after a's session expired");
                check(eventually(() -> statesA.contains(ConnectionState.LOST)), "a never saw LOST: " + statesA);
                check(eventually(() -> !latchA.hasLeadership()), "a still thinks it leads");
                check(latchB.getLeader().getId().equals("b"), "leader is not b");
            }
        }
    }

    static void restart() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            int port = server.getPort();
            List<ConnectionState> states = new CopyOnWriteArrayList<>();
            try (CuratorFramework c = curator(server, states)) {
                c.create().forPath("/kept", "v".getBytes());
                c.create().withMode(CreateMode.EPHEMERAL).forPath("/mine");
                long sid = sessionOf(c);
                long pid = server.getPid();
                server.restart();
                check(server.getPort() == port, "port changed on restart: " + port + " -> " + server.getPort());
                check(server.getPid() != pid, "restart did not start a new process");
                check(eventually(() -> states.contains(ConnectionState.RECONNECTED)), "no RECONNECTED: " + states);
                check(new String(c.getData().forPath("/kept")).equals("v"), "data lost on restart");
                check(c.checkExists().forPath("/mine") != null, "ephemeral lost on restart");
                check(sessionOf(c) == sid, "session changed on restart");
            }
        }
    }

    static void disconnect() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            List<ConnectionState> states = new CopyOnWriteArrayList<>();
            try (CuratorFramework c = curator(server, states)) {
                long sid = sessionOf(c);
                server.disconnect(sid);
                check(eventually(() -> states.contains(ConnectionState.SUSPENDED)), "no SUSPENDED: " + states);
                check(eventually(() -> states.contains(ConnectionState.RECONNECTED)), "no RECONNECTED: " + states);
                check(sessionOf(c) == sid, "a disconnect changed the session");
                check(!states.contains(ConnectionState.LOST), "a disconnect lost the session");
            }
        }
    }

    static void reset() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            try (CuratorFramework c = curator(server, null)) {
                c.create().creatingParentsIfNeeded().forPath("/a/b/c");
                server.reset();
                check(c.getChildren().forPath("/").equals(List.of("zookeeper")),
                        "tree after reset: " + c.getChildren().forPath("/"));
            }
        }
    }

    static void manualClock() throws Exception {
        try (ZkdTestingServer server = ZkdTestingServer.builder().manualClock().build()) {
            List<ConnectionState> states = new CopyOnWriteArrayList<>();
            try (CuratorFramework c = curator(server, states)) {
                c.create().withMode(CreateMode.EPHEMERAL).forPath("/mine");
                server.advanceClock(Duration.ofSeconds(1));
                check(c.checkExists().forPath("/mine") != null, "the session expired after 1 s of a 10 s timeout");
                server.advanceClock(Duration.ofMinutes(1));
                check(eventually(() -> states.contains(ConnectionState.LOST)), "no LOST after the clock moved: " + states);
            }
        }
    }

    static void pause() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            try (CuratorFramework c = curator(server, null)) {
                c.create().forPath("/p", "1".getBytes());
                server.pause();
                List<byte[]> got = new CopyOnWriteArrayList<>();
                c.getData().inBackground((client, event) -> got.add(event.getData())).forPath("/p");
                Thread.sleep(300);
                check(got.isEmpty(), "answered while paused");
                server.resume();
                check(eventually(() -> !got.isEmpty()), "not answered after resume");
                check(new String(got.get(0)).equals("1"), "wrong data after resume");
            }
        }
    }

    static void fault() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            try (CuratorFramework c = curator(server, null)) {
                c.create().forPath("/f", "x".getBytes());
                // Limited to /f: Curator's ensemble tracker reads /zookeeper/config with a
                // getData of its own, whenever its connection comes up.
                String rule = server.addFault("{\"action\":\"error\",\"code\":\"NONODE\",\"opcode\":\"getData\",\"path\":\"/f\",\"count\":1}");
                check(rule.contains("\"id\""), "no id in " + rule);
                try {
                    c.getData().forPath("/f");
                    throw new AssertionError("the fault did not fire");
                } catch (org.apache.zookeeper.KeeperException.NoNodeException expected) {
                    // the rule answered NONODE once
                }
                check(new String(c.getData().forPath("/f")).equals("x"), "the rule fired twice");
                server.clearFaults();
            }
        }
    }

    /**
     * With its replies dropped, a client's create is applied (another client sees it) though
     * its reply never comes; removing the fault closes the connection, and the client
     * reconnects with its session.
     */
    static void droppedReplies() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            try (CuratorFramework c = curator(server, null);
                 CuratorFramework other = curator(server, null)) {
                long session = c.getZookeeperClient().getZooKeeper().getSessionId();
                String added = server.addNetFault(
                        "{\"action\":\"drop-replies\",\"session\":\"0x" + Long.toHexString(session) + "\"}");
                check(added.contains("\"connections\":1"), "not on the client's connection: " + added);
                java.util.concurrent.CountDownLatch answered = new java.util.concurrent.CountDownLatch(1);
                c.getZookeeperClient().getZooKeeper().create("/lost-reply", "v".getBytes(),
                        org.apache.zookeeper.ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT,
                        (rc, path, ctx, name) -> answered.countDown(), null);
                check(eventuallyExists(other, "/lost-reply"), "the create was not applied");
                check(!answered.await(300, TimeUnit.MILLISECONDS), "the reply came");
                server.clearNetFaults();
                check(server.netFaultsJson().contains("[]"), "not cleared: " + server.netFaultsJson());
                check(c.blockUntilConnected(30, TimeUnit.SECONDS), "no reconnection");
                check(c.getZookeeperClient().getZooKeeper().getSessionId() == session, "a new session");
            }
        }
    }

    /**
     * The create is applied but its reply is lost with the connection (drop-after): Curator's
     * protected ephemeral-sequential create finds its own node on retry, so exactly one node
     * results, and a plain create of the same kind sees the connection loss.
     */
    static void protectedCreateUnderDropAfter() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            try (CuratorFramework c = curator(server, null)) {
                c.create().forPath("/jobs");
                server.addFault("{\"action\":\"drop-after\",\"opcode\":\"create\",\"path\":\"/jobs/\",\"count\":1}");
                String made = c.create().creatingParentsIfNeeded().withProtection()
                        .withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath("/jobs/job-");
                List<String> kids = c.getChildren().forPath("/jobs");
                check(kids.size() == 1, "expected exactly one node, got " + kids);
                check(made.endsWith(kids.get(0)), made + " is not " + kids);
                String faults = server.admin("GET", "/zkd/faults", null);
                check(faults.contains("\"fired\":1"), "the drop-after rule did not fire: " + faults);

                server.addFault("{\"action\":\"drop-after\",\"opcode\":\"create\",\"path\":\"/plain\",\"count\":1}");
                try {
                    c.getZookeeperClient().getZooKeeper().create("/plain", new byte[0],
                            org.apache.zookeeper.ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                    throw new AssertionError("the reply was not dropped");
                } catch (org.apache.zookeeper.KeeperException.ConnectionLossException expected) {
                    // applied, reply lost
                }
                check(eventuallyExists(c, "/plain"), "/plain was not created");
            }
        }
    }

    static void close() throws Exception {
        ZkdTestingServer server = new ZkdTestingServer();
        int port = server.getPort();
        long pid = server.getPid();
        java.io.File dir = server.getTempDirectory();
        check(dir.isDirectory(), "no temp directory");
        server.close();
        check(!server.isRunning(), "still running after close");
        check(ProcessHandle.of(pid).map(p -> !p.isAlive()).orElse(true), "process " + pid + " still alive");
        check(!dir.exists(), "temp directory left behind: " + dir);
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            throw new AssertionError("port " + port + " still accepts connections");
        } catch (ConnectException expected) {
            // nothing listens any more
        }
    }

    static void zookeeperVersion() throws Exception {
        for (String version : new String[] {"3.8", "3.9"}) {
            try (ZkdTestingServer server = ZkdTestingServer.builder()
                    .zookeeperVersion(version).build()) {
                String srvr;
                try (Socket s = new Socket("127.0.0.1", server.getPort())) {
                    s.getOutputStream().write("srvr".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    srvr = new String(s.getInputStream().readAllBytes(),
                            java.nio.charset.StandardCharsets.US_ASCII);
                }
                check(srvr.startsWith("Zookeeper version: " + version + "."), "srvr: " + srvr);
            }
        }
        try {
            ZkdTestingServer.builder().zookeeperVersion("3.7");
            throw new AssertionError("3.7 accepted");
        } catch (IllegalArgumentException expected) {
            // only 3.8 and 3.9
        }
    }

    static void adminErrors() throws Exception {
        try (ZkdTestingServer server = new ZkdTestingServer()) {
            try {
                server.expireSession(0x1234L);
                throw new AssertionError("expiring an unknown session succeeded");
            } catch (ZkdAdminException e) {
                check(e.status() == 404, "status " + e.status());
            }
            try {
                server.advanceClock(Duration.ofSeconds(1));
                throw new AssertionError("advancing the real clock succeeded");
            } catch (ZkdAdminException e) {
                check(e.status() == 409, "status " + e.status());
            }
        }
    }
}
