package zkd.testing;

import static zkd.testing.ZkdTestingServerTest.check;
import static zkd.testing.ZkdTestingServerTest.curator;
import static zkd.testing.ZkdTestingServerTest.eventually;
import static zkd.testing.ZkdTestingServerTest.sessionOf;
import static zkd.testing.ZkdTestingServerTest.test;

import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

/**
 * Tests of {@link ZkdTestingCluster} with Curator against the real zkd binary, printed as
 * {@link ZkdTestingServerTest}'s are.
 */
public final class ZkdTestingClusterTest {
    public static void main(String[] args) {
        test("instancesAreTheMembers", ZkdTestingClusterTest::instances);
        test("sessionAndEphemeralSurviveKillingTheConnectedMember", ZkdTestingClusterTest::failover);
        test("killAndRestartAnswerForUnknownOrStoppedMembers", ZkdTestingClusterTest::killAndRestartResults);
        test("closeStopsEveryMember", ZkdTestingClusterTest::close);
        test("aPartitionCutsAMemberOffUntilHealed", ZkdTestingClusterTest::partition);
        ZkdTestingServerTest.finish();
    }

    static void instances() throws Exception {
        try (ZkdTestingCluster cluster = new ZkdTestingCluster(3)) {
            check(cluster.getInstances().isEmpty(), "instances before start: " + cluster.getInstances());
            cluster.start();
            List<ZkdInstanceSpec> specs = new ArrayList<>(cluster.getInstances());
            check(specs.size() == 3, "instances: " + specs);
            for (int i = 0; i < 3; i++) {
                ZkdInstanceSpec s = specs.get(i);
                check(s.getServerId() == i + 1, "member " + i + " has id " + s.getServerId());
                check(s.getPort() > 0, "no port: " + s);
                check(cluster.membersJson().contains("\"client_address\":\"" + s.getConnectString() + "\""),
                        s + " is not in " + cluster.membersJson());
                // each member answers on its own port
                try (ZooKeeper zk = connectTo(s.getConnectString())) {
                    check(cluster.findConnectionInstance(zk).equals(s), "client of " + s + " found on another member");
                }
            }
            check(specs.stream().map(ZkdInstanceSpec::getPort).distinct().count() == 3, "ports repeat: " + specs);
            check(cluster.getConnectString().split(",").length == 3, "connect string " + cluster.getConnectString());
        }
    }

    /**
     * A Curator client on the cluster's connect string keeps its session and its ephemeral when
     * the member it is connected to is killed, and the member serves again after restartServer.
     */
    static void failover() throws Exception {
        try (ZkdTestingCluster cluster = new ZkdTestingCluster(3)) {
            cluster.start();
            List<ConnectionState> states = new CopyOnWriteArrayList<>();
            try (CuratorFramework c = curator(cluster.getConnectString(), states)) {
                c.create().withMode(CreateMode.EPHEMERAL).forPath("/mine", "v".getBytes());
                long sid = sessionOf(c);
                ZkdInstanceSpec first = cluster.findConnectionInstance(c.getZookeeperClient().getZooKeeper());
                check(first != null, "the client is connected to no member");

                check(cluster.killServer(first), "killServer(" + first + ") returned false");
                check(stateOf(cluster, first).equals("stopped"), first + " not stopped: " + cluster.membersJson());
                check(eventually(() -> states.contains(ConnectionState.RECONNECTED)), "no RECONNECTED: " + states);
                check(!states.contains(ConnectionState.LOST), "the session was lost: " + states);
                check(sessionOf(c) == sid, "the session changed on failover");
                ZkdInstanceSpec second = cluster.findConnectionInstance(c.getZookeeperClient().getZooKeeper());
                check(second != null && !second.equals(first), "after the kill the client is on " + second);
                check(new String(c.getData().forPath("/mine")).equals("v"), "the ephemeral is gone after failover");
                refused(first);

                check(cluster.restartServer(first), "restartServer(" + first + ") returned false");
                check(stateOf(cluster, first).equals("running"), first + " not running: " + cluster.membersJson());
                try (ZooKeeper direct = connectTo(first.getConnectString())) {
                    check(direct.exists("/mine", false).getEphemeralOwner() == sid,
                            "the restarted member does not show the client's ephemeral");
                }
                check(sessionOf(c) == sid, "the session changed after the restart");
                check(!states.contains(ConnectionState.LOST), "the session was lost: " + states);
            }
        }
    }

    /**
     * Cutting the leader off: the two others elect one of their own and write on; the cut
     * member is marked in the members listing; healed, it serves what it missed.
     */
    static void partition() throws Exception {
        try (ZkdTestingCluster cluster = new ZkdTestingCluster(3)) {
            cluster.start();
            List<ZkdInstanceSpec> specs = new ArrayList<>(cluster.getInstances());
            List<ConnectionState> states = new CopyOnWriteArrayList<>();
            try (CuratorFramework c = curator(specs.get(0).getConnectString(), states)) {
                c.create().forPath("/split", "before".getBytes());
                cluster.partition(List.of(List.of(specs.get(2)), List.of(specs.get(0), specs.get(1))));
                String json = cluster.membersJson();
                check(json.contains("\"leader\":2"), "member 2 should lead: " + json);
                check(json.contains("\"cut\":true"), "no member cut off: " + json);
                c.setData().forPath("/split", "after".getBytes());
                cluster.heal();
                check(!cluster.membersJson().contains("\"cut\":true"), "still cut: " + cluster.membersJson());
                try (ZooKeeper direct = connectTo(specs.get(2).getConnectString())) {
                    check(eventually(() -> {
                        try {
                            return new String(direct.getData("/split", false, null)).equals("after");
                        } catch (Exception e) {
                            return false;
                        }
                    }), "the healed member does not serve the write it missed");
                }
                // One way: member 1 no longer hears leader 2; instantly cut off, 2 and 3 lead on.
                cluster.cutOneWay(List.of(List.of(specs.get(1), specs.get(0))));
                json = cluster.membersJson();
                check(json.contains("\"cut_links\":[[2,1]]"), "no one-way cut: " + json);
                check(json.contains("\"leader\":2"), "member 2 should still lead: " + json);
                cluster.heal();
                check(cluster.membersJson().contains("\"cut_links\":[]"), "still cut: " + cluster.membersJson());
            }
        }
    }

    static void killAndRestartResults() throws Exception {
        try (ZkdTestingCluster cluster = new ZkdTestingCluster(3); ZkdTestingCluster other = new ZkdTestingCluster(1)) {
            cluster.start();
            other.start();
            ZkdInstanceSpec foreign = other.getInstances().iterator().next();
            check(!cluster.killServer(foreign), "killed a member of another cluster");
            check(!cluster.restartServer(foreign), "restarted a member of another cluster");
            ZkdInstanceSpec two = new ArrayList<>(cluster.getInstances()).get(1);
            check(cluster.killServer(two), "first kill returned false");
            check(!cluster.killServer(two), "second kill of a stopped member returned true");
            check(cluster.restartServer(two), "restart of a stopped member returned false");
            check(cluster.restartServer(two), "restart of a running member returned false");
            try (ZooKeeper zk = connectTo(two.getConnectString())) {
                check(zk.exists("/zookeeper", false) != null, "the restarted member does not serve");
            }
        }
    }

    static void close() throws Exception {
        ZkdTestingCluster cluster = new ZkdTestingCluster(3);
        cluster.start();
        long pid = cluster.server().getPid();
        List<ZkdInstanceSpec> specs = new ArrayList<>(cluster.getInstances());
        cluster.close();
        check(ProcessHandle.of(pid).map(p -> !p.isAlive()).orElse(true), "process " + pid + " still alive");
        check(!cluster.getTempDirectory().exists(), "temp directory left behind");
        for (ZkdInstanceSpec s : specs) {
            refused(s);
        }
    }

    /** The member's {@code state} in {@code GET /zkd/members} (one flat object per member). */
    private static String stateOf(ZkdTestingCluster cluster, ZkdInstanceSpec s) {
        for (String member : cluster.membersJson().split("\\{")) {
            if (member.matches("(?s).*\"id\":" + s.getServerId() + "[,}].*")) {
                java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"state\":\"(\\w+)\"").matcher(member);
                return m.find() ? m.group(1) : "";
            }
        }
        return "";
    }

    /** Nothing listens on the member's port. */
    private static void refused(ZkdInstanceSpec s) throws Exception {
        try (Socket sock = new Socket()) {
            sock.connect(new InetSocketAddress(s.getHostname(), s.getPort()), 2000);
            throw new AssertionError(s + " still accepts connections");
        } catch (ConnectException expected) {
            // the member's listener is closed
        }
    }

    /** A plain ZooKeeper client on one address, connected. */
    private static ZooKeeper connectTo(String connectString) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connectString, 10_000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            zk.close();
            throw new AssertionError("no connection to " + connectString);
        }
        return zk;
    }
}
