package zkd.testing;

import java.io.Closeable;
import java.io.File;
import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.stream.Collectors;

import org.apache.zookeeper.ZooKeeper;

/**
 * A simulated ZooKeeper ensemble in one zkd process ({@code zkd --ensemble N}), shaped like
 * Curator's {@code TestingCluster}: {@code new ZkdTestingCluster(3)} then {@link #start()};
 * {@link #getConnectString()} lists every member for a client; {@link #getInstances()} are the
 * members; {@link #killServer(ZkdInstanceSpec)} stops one (its listener closes and its clients
 * fail over to the others, keeping their sessions) and {@link #restartServer(ZkdInstanceSpec)}
 * brings it back, both through zkd's members control plane. Starting takes milliseconds, not
 * one JVM quorum per member.
 *
 * <p>The whole-server helpers of {@link ZkdTestingServer} ({@link #server()}:
 * {@code expireSession}, {@code disconnect}, {@code reset}, faults, the manual clock) work on
 * the ensemble as on one server. The binary is found by {@link ZkdBinary#find()}. Only
 * {@link #findConnectionInstance(ZooKeeper)} needs the ZooKeeper client on the class path.
 */
public class ZkdTestingCluster implements Closeable {
    private final int instanceQty;
    private final ZkdTestingServer server;
    private List<ZkdInstanceSpec> instances = List.of();

    /** A cluster of {@code instanceQty} members (1 to 255) on free ports; call {@link #start()}. */
    public ZkdTestingCluster(int instanceQty) throws Exception {
        this(instanceQty, ZkdTestingServer.builder());
    }

    /**
     * A cluster of {@code instanceQty} members with the options of {@code options} (a manual
     * clock, tick time, extra flags, the binary); its port is ignored, every member gets a
     * free port. Call {@link #start()}.
     */
    public ZkdTestingCluster(int instanceQty, ZkdTestingServer.Builder options) throws Exception {
        if (instanceQty < 1 || instanceQty > 255) {
            throw new IllegalArgumentException("an ensemble has 1 to 255 members, not " + instanceQty);
        }
        this.instanceQty = instanceQty;
        this.server = options.port(0).args("--ensemble", Integer.toString(instanceQty)).build(false);
        this.server.expectListeners(instanceQty);
    }

    /** Starts the process with every member running and waits until all of them listen. */
    public synchronized void start() throws Exception {
        if (server.isRunning()) {
            return;
        }
        server.start();
        List<String> addresses = server.listeningAddresses();
        if (addresses.size() != instanceQty) {
            server.stop();
            throw new IllegalStateException("zkd printed " + addresses.size() + " listening lines for "
                    + instanceQty + " members:\n" + server.output());
        }
        List<ZkdInstanceSpec> specs = new ArrayList<>();
        for (int i = 0; i < addresses.size(); i++) {
            String a = addresses.get(i);
            int colon = a.lastIndexOf(':');
            specs.add(new ZkdInstanceSpec(i + 1, a.substring(0, colon), Integer.parseInt(a.substring(colon + 1))));
        }
        instances = List.copyOf(specs);
    }

    /** Stops the process (every member); {@link #start()} starts a fresh one on new ports. */
    public synchronized void stop() throws IOException {
        server.stop();
    }

    /** Stops the process and deletes its temporary directory. */
    @Override
    public synchronized void close() throws IOException {
        server.close();
    }

    /** The members, in id order (empty before {@link #start()}). */
    public Collection<ZkdInstanceSpec> getInstances() {
        return instances;
    }

    /** Every member's {@code HOST:PORT}, comma-separated, for any ZooKeeper client. */
    public String getConnectString() {
        return instances.stream().map(ZkdInstanceSpec::getConnectString).collect(Collectors.joining(","));
    }

    /**
     * Stops one member: its listener closes and its connections drop; clients fail over to
     * the other members with their sessions. Stopping the leader makes the running member with
     * the lowest id leader. Returns false when the member is not one of this cluster's or is
     * already stopped.
     */
    public boolean killServer(ZkdInstanceSpec instance) throws Exception {
        if (!instances.contains(instance)) {
            return false;
        }
        try {
            server.admin("POST", "/zkd/members/" + instance.getServerId() + "/stop", null);
            return true;
        } catch (ZkdAdminException e) {
            if (e.status() == 409) {
                return false;
            }
            throw e;
        }
    }

    /**
     * Restarts one member on its port, as {@code TestingCluster.restartServer} does: a running
     * member is stopped first (its clients fail over), a stopped one is started. Returns false
     * when the member is not one of this cluster's.
     */
    public boolean restartServer(ZkdInstanceSpec instance) throws Exception {
        if (!instances.contains(instance)) {
            return false;
        }
        killServer(instance);
        server.admin("POST", "/zkd/members/" + instance.getServerId() + "/start", null);
        return true;
    }

    /**
     * The member {@code client} is connected to, or null when it is connected to none of them.
     * Reads the client's remote address through ZooKeeper's test hook
     * {@code testableRemoteSocketAddress}, as Curator's {@code TestingCluster} does.
     */
    public ZkdInstanceSpec findConnectionInstance(ZooKeeper client) throws Exception {
        Method m = ZooKeeper.class.getDeclaredMethod("testableRemoteSocketAddress");
        m.setAccessible(true);
        SocketAddress remote = (SocketAddress) m.invoke(client);
        if (!(remote instanceof InetSocketAddress)) {
            return null;
        }
        int port = ((InetSocketAddress) remote).getPort();
        for (ZkdInstanceSpec spec : instances) {
            if (spec.getPort() == port) {
                return spec;
            }
        }
        return null;
    }

    /**
     * Makes a member trail the committed history by {@code lag} ({@code Duration.ZERO}: in step
     * again); its clients read its replica, as from a lagging follower.
     */
    public void lagServer(ZkdInstanceSpec instance, Duration lag) {
        server.admin("POST", "/zkd/members/" + instance.getServerId() + "/lag?ms=" + lag.toMillis(), null);
    }

    /**
     * Splits the members into groups (members named in none form one more group): the group
     * holding a majority of the voters keeps the quorum, electing a leader of its own if its
     * leader is elsewhere; every other member is cut off, serving only read-only clients from
     * what it had, until {@link #heal()}.
     */
    public void partition(List<List<ZkdInstanceSpec>> groups) {
        StringBuilder text = new StringBuilder();
        for (List<ZkdInstanceSpec> group : groups) {
            if (text.length() > 0) {
                text.append("%2F");
            }
            StringBuilder ids = new StringBuilder();
            for (ZkdInstanceSpec spec : group) {
                if (ids.length() > 0) {
                    ids.append("%2C");
                }
                ids.append(spec.getServerId());
            }
            text.append(ids);
        }
        server.admin("POST", "/zkd/partition?groups=" + text, null);
    }

    /**
     * Cuts links one way, each a pair {@code [from, to]} whose messages from {@code from} to
     * {@code to} are lost (replacing any partition before): a follower that does not hear its
     * leader, or that its leader does not hear, leaves it; a leader that hears too few
     * followers loses its quorum. Until {@link #heal()}.
     */
    public void cutOneWay(List<List<ZkdInstanceSpec>> links) {
        StringBuilder text = new StringBuilder();
        for (List<ZkdInstanceSpec> link : links) {
            if (link.size() != 2) {
                throw new IllegalArgumentException("a one-way link is a [from, to] pair, not " + link);
            }
            if (text.length() > 0) {
                text.append("%2C");
            }
            text.append(link.get(0).getServerId()).append("%3E").append(link.get(1).getServerId());
        }
        server.admin("POST", "/zkd/partition?one_way=" + text, null);
    }

    /** Ends a partition: the cut members apply what they missed and serve again. */
    public void heal() {
        server.admin("POST", "/zkd/heal", null);
    }

    /** The members as the admin API's JSON ({@code GET /zkd/members}: leader, state, mode, lag). */
    public String membersJson() {
        return server.admin("GET", "/zkd/members", null);
    }

    /** The history's mark (see {@link ZkdTestingServer#historyMark()}): every member's events
     * are in the one history. */
    public long historyMark() {
        return server.historyMark();
    }

    /** Writes the members' history after {@code afterSeq} and its timeline (see
     * {@link ZkdTestingServer#saveHistory(Path, String, long)}). */
    public List<Path> saveHistory(Path dir, String name, long afterSeq) throws IOException {
        return server.saveHistory(dir, name, afterSeq);
    }

    /** The one zkd process, for the whole-server control plane (expireSession, reset, faults, ...). */
    public ZkdTestingServer server() {
        return server;
    }

    /** The data directory shared by the members. */
    public File getTempDirectory() {
        return server.getTempDirectory();
    }

    @Override
    public String toString() {
        return "ZkdTestingCluster[" + getConnectString() + (server.isRunning() ? "" : ", stopped") + "]";
    }
}
