import java.io.StringReader;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryForever;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.server.quorum.flexible.QuorumMaj;

/**
 * Curator against a three-member ensemble (compiled with {@link JavaClientSuite}, whose
 * assertion helpers it uses): a session and its ephemeral node survive stopping
 * the member the client is connected to (and the leader), LeaderLatch keeps exactly one leader
 * throughout, and the ensemble's configuration parses with ZooKeeper's own parser.
 *
 * <pre>usage: java EnsembleSuite HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL</pre>
 *
 * CONTROL_URL is zkd's admin listener ({@code http://HOST:PORT}); members are stopped and
 * started with {@code POST CONTROL_URL/zkd/members/ID/stop|start}, ID being the member's
 * position in the connection string (1-based). Prints {@code PASS name} / {@code FAIL name:
 * reason} per check and {@code N passed, M failed}; exits 1 if anything failed.
 */
public final class EnsembleSuite {
    static String[] members;
    static String control;
    static final AtomicInteger passed = new AtomicInteger();
    static final AtomicInteger failed = new AtomicInteger();

    static void check(boolean cond, String message) {
        JavaClientSuite.check(cond, message);
    }

    /** Waits up to 40 s: a real ensemble refuses clients while it elects a leader. */
    static void waitFor(String what, BooleanSupplier cond) throws InterruptedException {
        JavaClientSuite.waitUntil(cond, what, 40_000);
    }

    static void run(String name, JavaClientSuite.Body c) {
        try {
            c.run();
            passed.incrementAndGet();
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            failed.incrementAndGet();
            System.out.println("FAIL " + name + ": " + t);
        }
    }

    /** POSTs a member operation to the control plane. */
    static void member(int id, String op) throws Exception {
        HttpURLConnection c =
                (HttpURLConnection) new URL(control + "/zkd/members/" + id + "/" + op).openConnection();
        c.setRequestMethod("POST");
        c.setConnectTimeout(5000);
        c.setReadTimeout(10000);
        int status = c.getResponseCode();
        check(status == 200, op + " member " + id + " answered HTTP " + status);
        c.disconnect();
    }

    static CuratorFramework client() throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(String.join(",", members))
                .sessionTimeoutMs(30_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new RetryForever(100))
                .build();
        c.start();
        check(c.blockUntilConnected(40, TimeUnit.SECONDS), "client connects");
        return c;
    }

    /** The 1-based member a client is connected to, from the client's description of itself. */
    static int memberOf(CuratorFramework c) throws Exception {
        String text = c.getZookeeperClient().getZooKeeper().toString();
        int at = text.indexOf("remoteserver:");
        check(at >= 0, "no remote server in " + text);
        String rest = text.substring(at + "remoteserver:".length()).trim();
        // "host/1.2.3.4:2181 lastZxid..." or "/1.2.3.4:2181 ...": members in network
        // namespaces share a port and differ by address, so the address counts first.
        String addr = rest.split("\\s+")[0];
        addr = addr.substring(addr.indexOf('/') + 1);
        for (int i = 0; i < members.length; i++) {
            if (members[i].equals(addr)) {
                return i + 1;
            }
        }
        int port = Integer.parseInt(rest.replaceAll("^[^:]*:(\\d+).*$", "$1"));
        for (int i = 0; i < members.length; i++) {
            if (members[i].endsWith(":" + port)) {
                return i + 1;
            }
        }
        throw new JavaClientSuite.CheckFailed("port " + port + " is not a member: " + text);
    }

    static void sessionAndEphemeralSurviveStoppingTheirMember() throws Exception {
        CuratorFramework c = client();
        CuratorFramework observer = client();
        List<ConnectionState> states = new CopyOnWriteArrayList<>();
        c.getConnectionStateListenable().addListener((cl, s) -> states.add(s));
        try {
            String path = "/ensemble-java-" + System.nanoTime();
            c.create().withMode(CreateMode.EPHEMERAL).forPath(path, "mine".getBytes(StandardCharsets.UTF_8));
            long session = c.getZookeeperClient().getZooKeeper().getSessionId();
            for (int round = 0; round < 2; round++) {
                int m = memberOf(c);
                member(m, "stop");
                waitFor("RECONNECTED after stopping member " + m, () -> states.contains(ConnectionState.RECONNECTED));
                check(memberOf(c) != m, "moved to another member");
                check(c.getZookeeperClient().getZooKeeper().getSessionId() == session, "same session");
                check(!states.contains(ConnectionState.LOST), "session never lost: " + states);
                check(observer.checkExists().forPath(path) != null, "ephemeral kept");
                c.setData().forPath(path, ("round " + round).getBytes(StandardCharsets.UTF_8));
                member(m, "start");
                states.clear();
            }
        } finally {
            c.close();
            observer.close();
        }
    }

    static void leaderLatchKeepsOneLeaderWhileMembersStop() throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        List<LeaderLatch> latches = new ArrayList<>();
        String path = "/ensemble-latch-" + System.nanoTime();
        try {
            startLatches(clients, latches, path);
            waitFor("one leader", () -> leaders(latches) == 1);
            int maxSeen = 1;
            for (int round = 0; round < 3; round++) {
                int leaderIdx = -1;
                for (int i = 0; i < 3; i++) {
                    if (latches.get(i).hasLeadership()) {
                        leaderIdx = i;
                    }
                }
                check(leaderIdx >= 0, "a leader before round " + round);
                int m = memberOf(clients.get(leaderIdx));
                member(m, "stop");
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                while (System.nanoTime() < until) {
                    maxSeen = Math.max(maxSeen, leaders(latches));
                    Thread.sleep(5);
                }
                waitWithState("one leader after stopping member " + m, () -> leaders(latches) == 1,
                        clients, latches, path);
                member(m, "start");
                waitWithState("three participants", () -> participants(clients.get(0), path) == 3,
                        clients, latches, path);
            }
            check(maxSeen == 1, "at most one leader at any time, saw " + maxSeen);
        } finally {
            for (LeaderLatch l : latches) {
                l.close();
            }
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    /** Three clients, each with a started LeaderLatch on {@code path}, added to the lists. */
    static void startLatches(List<CuratorFramework> clients, List<LeaderLatch> latches, String path)
            throws Exception {
        for (int i = 0; i < 3; i++) {
            CuratorFramework c = client();
            clients.add(c);
            LeaderLatch l = new LeaderLatch(c, path, "p" + i);
            latches.add(l);
            l.start();
        }
    }

    /**
     * {@link #waitFor}, and on a time-out the failure also says what each latch and client
     * saw: leadership, its node, the member it is connected to and the participants.
     */
    static void waitWithState(String what, BooleanSupplier cond, List<CuratorFramework> clients,
            List<LeaderLatch> latches, String path) throws InterruptedException {
        try {
            waitFor(what, cond);
        } catch (JavaClientSuite.CheckFailed e) {
            StringBuilder state = new StringBuilder(e.getMessage());
            for (int i = 0; i < latches.size(); i++) {
                CuratorFramework c = clients.get(i);
                String at;
                try {
                    at = "member " + memberOf(c);
                } catch (Throwable t) {
                    at = "no member (" + t.getMessage() + ")";
                }
                state.append("; latch ").append(i)
                        .append(" leader=").append(latches.get(i).hasLeadership())
                        .append(" state=").append(latches.get(i).getState())
                        .append(" node=").append(latches.get(i).getOurPath())
                        .append(" connected=").append(c.getZookeeperClient().isConnected())
                        .append(" session=0x").append(Long.toHexString(sessionOf(c)))
                        .append(" ").append(at);
            }
            try {
                state.append("; participants ").append(clients.get(0).getChildren().forPath(path));
            } catch (Exception x) {
                state.append("; participants unknown (").append(x).append(")");
            }
            throw new JavaClientSuite.CheckFailed(state.toString());
        }
    }

    static long sessionOf(CuratorFramework c) {
        try {
            return c.getZookeeperClient().getZooKeeper().getSessionId();
        } catch (Exception e) {
            return 0;
        }
    }

    static int participants(CuratorFramework c, String path) {
        try {
            return c.getChildren().forPath(path).size();
        } catch (Exception e) {
            return -1;
        }
    }

    static int leaders(List<LeaderLatch> latches) {
        int n = 0;
        for (LeaderLatch l : latches) {
            if (l.hasLeadership()) {
                n++;
            }
        }
        return n;
    }

    static void configurationListsTheMembers() throws Exception {
        CuratorFramework c = client();
        try {
            String text = new String(c.getConfig().forEnsemble(), StandardCharsets.UTF_8);
            Properties props = new Properties();
            props.load(new StringReader(text));
            QuorumMaj q = new QuorumMaj(props);
            check(q.getAllMembers().size() == members.length, "members in " + text);
            // Client addresses are listed when the configuration names them per server (zkd
            // always does).
            for (int i = 0; i < members.length; i++) {
                java.net.InetSocketAddress clientAddr = q.getAllMembers().get((long) (i + 1)).clientAddr;
                check(clientAddr == null || members[i].endsWith(":" + clientAddr.getPort()),
                        "member " + (i + 1) + " client address " + clientAddr);
            }
        } finally {
            c.close();
        }
    }

    /**
     * Takes the members and the control URL from the command line of {@code suite}; prints its
     * usage and exits 2 when they are not there.
     */
    static void readArgs(String suite, String[] args) {
        if (args.length != 2) {
            System.err.println("usage: java " + suite + " HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL");
            System.exit(2);
        }
        members = args[0].split(",");
        control = args[1];
    }

    /** Prints the totals and exits, with 1 when any check failed. */
    static void finish() {
        System.out.println(passed.get() + " passed, " + failed.get() + " failed");
        System.exit(failed.get() == 0 ? 0 : 1);
    }

    public static void main(String[] args) throws Exception {
        readArgs("EnsembleSuite", args);
        run("curator_session_and_ephemeral_survive_stopping_its_member", EnsembleSuite::sessionAndEphemeralSurviveStoppingTheirMember);
        run("curator_leader_latch_keeps_one_leader", EnsembleSuite::leaderLatchKeepsOneLeaderWhileMembersStop);
        run("configuration_lists_the_members", EnsembleSuite::configurationListsTheMembers);
        finish();
    }
}
