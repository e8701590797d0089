import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.api.transaction.CuratorTransactionResult;
import org.apache.curator.framework.api.transaction.OperationType;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.recipes.watch.PersistentWatcher;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooDefs.Perms;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;

/**
 * End-to-end checks with the Apache ZooKeeper Java client and Curator recipes against a server.
 *
 * <pre>usage: java JavaClientSuite HOST:PORT</pre>
 *
 * Prints {@code PASS name} or {@code FAIL name: reason} per check, then {@code N passed, M failed};
 * exits 1 if anything failed. Every check runs with a time limit, and the whole run is bounded by
 * a watchdog (JAVA_SUITE_TIMEOUT seconds, default 180).
 */
public final class JavaClientSuite {
    static final long WAIT_MS = 10_000;
    static final long CHECK_TIMEOUT_MS = 40_000;
    static final int SESSION_MS = 10_000;
    static final int SHORT_SESSION_MS = 4_000;

    static String addr;
    static String base;

    static final AtomicInteger passed = new AtomicInteger();
    static final AtomicInteger failed = new AtomicInteger();

    // --- small assertion helpers -------------------------------------------------------------

    static final class CheckFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        CheckFailed(String message) {
            super(message);
        }
    }

    static void check(boolean cond, String message) {
        if (!cond) {
            throw new CheckFailed(message);
        }
    }

    static void eq(Object want, Object got, String what) {
        if (want == null ? got != null : !want.equals(got)) {
            throw new CheckFailed(what + ": expected " + show(want) + ", got " + show(got));
        }
    }

    static String show(Object o) {
        if (o instanceof byte[]) {
            return "bytes'" + new String((byte[]) o, StandardCharsets.UTF_8) + "'";
        }
        if (o instanceof String) {
            return "'" + o + "'";
        }
        return String.valueOf(o);
    }

    interface Body {
        void run() throws Exception;
    }

    static <T extends Throwable> T expectThrows(Class<T> type, Body body) throws Exception {
        try {
            body.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
            throw new CheckFailed("expected " + type.getSimpleName() + ", got " + t);
        }
        throw new CheckFailed("expected " + type.getSimpleName() + ", nothing was thrown");
    }

    static void waitUntil(BooleanSupplier cond, String what) throws InterruptedException {
        waitUntil(cond, what, WAIT_MS);
    }

    static void waitUntil(BooleanSupplier cond, String what, long ms) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (System.nanoTime() < deadline) {
            if (cond.getAsBoolean()) {
                return;
            }
            Thread.sleep(20);
        }
        check(cond.getAsBoolean(), "timed out after " + ms + "ms waiting for " + what);
    }

    static WatchedEvent nextEvent(BlockingQueue<WatchedEvent> q, String what) throws InterruptedException {
        WatchedEvent e = q.poll(WAIT_MS, TimeUnit.MILLISECONDS);
        check(e != null, "no event within " + WAIT_MS + "ms: expected " + what);
        return e;
    }

    static void expectEvent(BlockingQueue<WatchedEvent> q, EventType type, String path) throws InterruptedException {
        expectEvent(q, type, path, "");
    }

    static void expectEvent(BlockingQueue<WatchedEvent> q, EventType type, String path, String when) throws InterruptedException {
        WatchedEvent e = nextEvent(q, type + " " + path + when);
        eq(type + " " + path, e.getType() + " " + e.getPath(), "event");
        eq(KeeperState.SyncConnected, e.getState(), "event state");
    }

    static void expectNoEvent(BlockingQueue<WatchedEvent> q, long ms) throws InterruptedException {
        WatchedEvent e = q.poll(ms, TimeUnit.MILLISECONDS);
        check(e == null, "unexpected event " + (e == null ? "" : e.getType() + " " + e.getPath()));
    }

    /** Creates the persistent node {@code path} with {@code data} (may be null), open to all. */
    static void persistent(ZooKeeper zk, String path, byte[] data) throws Exception {
        zk.create(path, data, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static void join(List<Thread> threads, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        for (Thread t : threads) {
            t.join(Math.max(1, deadline - System.currentTimeMillis()));
            check(!t.isAlive(), what + " thread still running after " + WAIT_MS + "ms");
        }
    }

    // --- clients ------------------------------------------------------------------------------

    /** Everything a check opens; closed (bounded) when the check ends. */
    static final class Resources implements AutoCloseable {
        final List<AutoCloseable> items = new ArrayList<>();

        <T extends AutoCloseable> T add(T item) {
            items.add(item);
            return item;
        }

        @Override
        public void close() {
            for (int i = items.size() - 1; i >= 0; i--) {
                try {
                    items.get(i).close();
                } catch (Exception ignored) {
                    // best effort
                }
            }
            items.clear();
        }
    }

    static final class Zk implements AutoCloseable {
        final ZooKeeper zk;
        final BlockingQueue<WatchedEvent> sessionEvents = new LinkedBlockingQueue<>();

        Zk(String connect, int sessionMs) throws Exception {
            CountDownLatch connected = new CountDownLatch(1);
            zk = new ZooKeeper(connect, sessionMs, event -> {
                if (event.getType() == EventType.None) {
                    sessionEvents.add(event);
                    if (event.getState() == KeeperState.SyncConnected) {
                        connected.countDown();
                    }
                }
            });
            if (!connected.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
                zk.close(1000);
                throw new CheckFailed("ZooKeeper client did not connect within " + WAIT_MS + "ms");
            }
        }

        @Override
        public void close() throws InterruptedException {
            zk.close(5000);
        }
    }

    static ZooKeeper zk(Resources r) throws Exception {
        return r.add(new Zk(addr, SESSION_MS)).zk;
    }

    static CuratorFramework curator(Resources r) throws Exception {
        return curator(r, addr, SESSION_MS);
    }

    static CuratorFramework curator(Resources r, String connect, int sessionMs) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(5000)
                .retryPolicy(new RetryNTimes(3, 100))
                .waitForShutdownTimeoutMs(5000)
                .build();
        r.add(c);
        c.start();
        check(c.blockUntilConnected((int) WAIT_MS, TimeUnit.MILLISECONDS), "Curator did not connect");
        return c;
    }

    /**
     * A TCP relay between a client and the server that can cut the client off (closing its
     * connections and refusing new ones) so that its session expires on the server.
     */
    static final class Relay implements AutoCloseable {
        final ServerSocket listener;
        final String upstreamHost;
        final int upstreamPort;
        final List<Socket> sockets = new CopyOnWriteArrayList<>();
        volatile boolean blocked;
        volatile boolean closed;

        Relay(String upstream) throws IOException {
            int colon = upstream.lastIndexOf(':');
            upstreamHost = upstream.substring(0, colon);
            upstreamPort = Integer.parseInt(upstream.substring(colon + 1));
            listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread t = new Thread(this::acceptLoop, "relay-accept");
            t.setDaemon(true);
            t.start();
        }

        String connectString() {
            return "127.0.0.1:" + listener.getLocalPort();
        }

        void acceptLoop() {
            while (!closed) {
                try {
                    Socket client = listener.accept();
                    if (blocked) {
                        client.close();
                        continue;
                    }
                    Socket server = new Socket();
                    server.connect(new InetSocketAddress(upstreamHost, upstreamPort), 5000);
                    sockets.add(client);
                    sockets.add(server);
                    pipe(client, server);
                    pipe(server, client);
                } catch (IOException e) {
                    if (closed) {
                        return;
                    }
                }
            }
        }

        void pipe(Socket from, Socket to) {
            Thread t = new Thread(() -> {
                byte[] buf = new byte[8192];
                try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                    int n;
                    while ((n = in.read(buf)) >= 0) {
                        out.write(buf, 0, n);
                        out.flush();
                    }
                } catch (IOException ignored) {
                    // connection cut
                } finally {
                    closeQuietly(from);
                    closeQuietly(to);
                }
            }, "relay-pipe");
            t.setDaemon(true);
            t.start();
        }

        void block() {
            blocked = true;
            for (Socket s : sockets) {
                closeQuietly(s);
            }
            sockets.clear();
        }

        void unblock() {
            blocked = false;
        }

        static void closeQuietly(Socket s) {
            try {
                s.close();
            } catch (IOException ignored) {
                // already closed
            }
        }

        @Override
        public void close() throws IOException {
            closed = true;
            listener.close();
            block();
        }
    }

    // --- plain ZooKeeper client checks ----------------------------------------------------------

    static void connectAndSessionTimeout() throws Exception {
        try (Resources r = new Resources()) {
            Zk z = r.add(new Zk(addr, SESSION_MS));
            eq(SESSION_MS, z.zk.getSessionTimeout(), "negotiated session timeout");
            check(z.zk.getSessionId() != 0, "session id is 0");
            eq(16, z.zk.getSessionPasswd().length, "session password length");
            eq(ZooKeeper.States.CONNECTED, z.zk.getState(), "state");
        }
    }

    static void createModes() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            String p = base + "/modes";
            Stat st = new Stat();
            eq(p, zk.create(p, b("root"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, st), "persistent");
            eq(0L, st.getEphemeralOwner(), "persistent ephemeralOwner");
            eq(4, st.getDataLength(), "dataLength from create2");

            eq(p + "/ps-0000000000", zk.create(p + "/ps-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL), "persistent sequential");
            String e = zk.create(p + "/e", b("x"), Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL, st);
            eq(p + "/e", e, "ephemeral");
            eq(zk.getSessionId(), st.getEphemeralOwner(), "ephemeral owner");
            eq(p + "/es-0000000002", zk.create(p + "/es-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL), "ephemeral sequential");

            eq(p + "/cont", zk.create(p + "/cont", b("c"), Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER, st), "container");
            eq(0L, st.getEphemeralOwner(), "container reports ephemeralOwner 0");
            eq(p + "/cont/child", zk.create(p + "/cont/child", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT), "child of container");

            eq(p + "/ttl", zk.create(p + "/ttl", b("t"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, st, 600_000), "ttl");
            eq(0L, st.getEphemeralOwner(), "ttl node reports ephemeralOwner 0");
            eq(p + "/ttl/child", zk.create(p + "/ttl/child", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT), "child of ttl node");
            eq(p + "/ttls-0000000005", zk.create(p + "/ttls-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL, st, 600_000), "ttl sequential");

            expectThrows(KeeperException.NoChildrenForEphemeralsException.class,
                    () -> zk.create(e + "/child", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            expectThrows(KeeperException.NodeExistsException.class,
                    () -> zk.create(p + "/e", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            expectThrows(KeeperException.NoNodeException.class,
                    () -> zk.create(p + "/missing/child", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            List<String> kids = zk.getChildren(p, false);
            Collections.sort(kids);
            eq(Arrays.asList("cont", "e", "es-0000000002", "ps-0000000000", "ttl", "ttls-0000000005"), kids, "children");
            // null data reads back as null; dataLength 0
            Stat ps = new Stat();
            eq(null, zk.getData(p + "/ps-0000000000", false, ps), "null data");
            eq(0, ps.getDataLength(), "dataLength of null data");
        }
    }

    static void statFields() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            String p = base + "/stat";
            Stat c = new Stat();
            zk.create(p, b("hello"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, c);
            check(c.getCzxid() > 0, "czxid > 0");
            eq(c.getCzxid(), c.getMzxid(), "mzxid at create");
            eq(c.getCzxid(), c.getPzxid(), "pzxid at create");
            eq(c.getCtime(), c.getMtime(), "mtime at create");
            check(Math.abs(System.currentTimeMillis() - c.getCtime()) < 60_000, "ctime is wall-clock ms: " + c.getCtime());
            eq("0 0 0 5 0 0", c.getVersion() + " " + c.getCversion() + " " + c.getAversion() + " " + c.getDataLength()
                    + " " + c.getNumChildren() + " " + c.getEphemeralOwner(), "version cversion aversion dataLength numChildren owner");

            Stat got = new Stat();
            eq("hello", s(zk.getData(p, false, got)), "data");
            eq(c, got, "getData stat equals create stat");

            Thread.sleep(5);
            Stat set = zk.setData(p, b("hello world"), 0);
            eq(1, set.getVersion(), "version after setData");
            eq(11, set.getDataLength(), "dataLength after setData");
            check(set.getMzxid() > c.getMzxid(), "mzxid advances");
            check(set.getMtime() >= c.getMtime(), "mtime does not go back");
            eq(c.getCtime(), set.getCtime(), "ctime unchanged");
            eq(c.getPzxid(), set.getPzxid(), "pzxid unchanged by setData");
            expectThrows(KeeperException.BadVersionException.class, () -> zk.setData(p, b("x"), 0));
            Stat set2 = zk.setData(p, b("hello world"), -1);
            eq(2, set2.getVersion(), "same data still bumps version");

            Stat child = new Stat();
            zk.create(p + "/a", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, child);
            Stat parent = zk.exists(p, false);
            eq("1 1", parent.getCversion() + " " + parent.getNumChildren(), "cversion numChildren after child create");
            eq(child.getCzxid(), parent.getPzxid(), "pzxid = child czxid");
            check(child.getCzxid() > set2.getMzxid(), "zxids increase: child czxid " + child.getCzxid() + " after mzxid " + set2.getMzxid());
            zk.delete(p + "/a", 0);
            parent = zk.exists(p, false);
            eq("2 0", parent.getCversion() + " " + parent.getNumChildren(), "cversion numChildren after child delete");
            check(parent.getPzxid() > child.getCzxid(), "pzxid advances on child delete");

            Stat acl = zk.setACL(p, Ids.OPEN_ACL_UNSAFE, 0);
            eq("1 2", acl.getAversion() + " " + acl.getVersion(), "aversion version after setACL");
            eq(parent.getMzxid(), acl.getMzxid(), "setACL does not change mzxid");
            expectThrows(KeeperException.BadVersionException.class, () -> zk.setACL(p, Ids.OPEN_ACL_UNSAFE, 0));

            Stat ch2 = new Stat();
            List<String> kids = zk.getChildren(p, false, ch2);
            eq(Collections.emptyList(), kids, "children");
            eq(acl, ch2, "getChildren2 stat");

            Stat root = zk.exists("/zookeeper", false);
            eq(0L, root.getCzxid(), "/zookeeper czxid");
            List<String> sys = zk.getChildren("/zookeeper", false);
            Collections.sort(sys);
            eq(Arrays.asList("config", "quota"), sys, "/zookeeper children");
        }
    }

    static void existsWatchFiresNodeCreated() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            ZooKeeper other = zk(r);
            String p = base + "/exists-watch";
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            eq(null, zk.exists(p, q::add), "exists on missing node");
            persistent(other, p, b("x"));
            expectEvent(q, EventType.NodeCreated, p);
            other.setData(p, b("y"), -1);
            expectNoEvent(q, 300);

            // data watch: NodeDataChanged then (re-armed) NodeDeleted
            zk.getData(p, q::add, null);
            other.setData(p, b("z"), -1);
            expectEvent(q, EventType.NodeDataChanged, p);
            zk.exists(p, q::add);
            other.delete(p, -1);
            expectEvent(q, EventType.NodeDeleted, p);
            expectNoEvent(q, 200);
        }
    }

    static void childWatchFiresNodeChildrenChanged() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            ZooKeeper other = zk(r);
            String p = base + "/child-watch";
            persistent(zk, p, null);
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            BlockingQueue<WatchedEvent> dataQ = new LinkedBlockingQueue<>();
            zk.getChildren(p, q::add);
            zk.getData(p, dataQ::add, null);
            persistent(other, p + "/c", null);
            expectEvent(q, EventType.NodeChildrenChanged, p);
            expectNoEvent(dataQ, 200);
            zk.getChildren(p, q::add);
            other.setData(p + "/c", b("no child event for grandchild data"), -1);
            expectNoEvent(q, 200);
            other.delete(p + "/c", -1);
            expectEvent(q, EventType.NodeChildrenChanged, p);
            // watch on a deleted parent: NodeDeleted to both child and data watchers
            zk.getChildren(p, q::add);
            other.delete(p, -1);
            expectEvent(q, EventType.NodeDeleted, p);
            expectEvent(dataQ, EventType.NodeDeleted, p);
            expectThrows(KeeperException.NoNodeException.class, () -> zk.getChildren(p, q::add));
        }
    }

    static void multiResults() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            String p = base + "/multi";
            persistent(zk, p, b("m"));
            List<OpResult> ok = zk.multi(Arrays.asList(
                    Op.create(p + "/a", b("a"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.create(p + "/s-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL),
                    Op.setData(p, b("m2"), 0),
                    Op.check(p + "/a", 0),
                    Op.delete(p + "/a", 0)));
            eq(5, ok.size(), "result count");
            check(ok.get(0) instanceof OpResult.CreateResult, "create result type " + ok.get(0));
            eq(p + "/a", ((OpResult.CreateResult) ok.get(0)).getPath(), "create path");
            eq(p + "/s-0000000001", ((OpResult.CreateResult) ok.get(1)).getPath(), "sequential create path");
            check(ok.get(2) instanceof OpResult.SetDataResult, "setData result type " + ok.get(2));
            eq(1, ((OpResult.SetDataResult) ok.get(2)).getStat().getVersion(), "setData version");
            check(ok.get(3) instanceof OpResult.CheckResult, "check result type " + ok.get(3));
            check(ok.get(4) instanceof OpResult.DeleteResult, "delete result type " + ok.get(4));
            long zxid = ((OpResult.SetDataResult) ok.get(2)).getStat().getMzxid();
            eq(zxid, zk.exists(p + "/s-0000000001", false).getCzxid(), "one zxid for the whole multi");

            KeeperException.BadVersionException e = expectThrows(KeeperException.BadVersionException.class, () -> zk.multi(Arrays.asList(
                    Op.create(p + "/b", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.setData(p, b("x"), 42),
                    Op.delete(p, -1),
                    Op.check(p, 1))));
            List<OpResult> res = e.getResults();
            check(res != null && res.size() == 4, "failure results " + res);
            int[] codes = new int[4];
            for (int i = 0; i < 4; i++) {
                check(res.get(i) instanceof OpResult.ErrorResult, "result " + i + " is " + res.get(i));
                codes[i] = ((OpResult.ErrorResult) res.get(i)).getErr();
            }
            eq(Arrays.toString(new int[] {0, KeeperException.Code.BADVERSION.intValue(),
                    KeeperException.Code.RUNTIMEINCONSISTENCY.intValue(), KeeperException.Code.RUNTIMEINCONSISTENCY.intValue()}),
                    Arrays.toString(codes), "per-op error codes");
            eq(null, zk.exists(p + "/b", false), "rolled-back create");
            eq("m2", s(zk.getData(p, false, null)), "data unchanged");

            KeeperException.NoNodeException nn = expectThrows(KeeperException.NoNodeException.class,
                    () -> zk.multi(Arrays.asList(Op.check(p, 1), Op.delete(p + "/nope", -1))));
            eq(KeeperException.Code.NONODE, nn.code(), "code");

            // all-read multi (multiRead)
            List<OpResult> reads = zk.multi(Arrays.asList(Op.getData(p), Op.getChildren(p), Op.getData(p + "/nope")));
            check(reads.get(0) instanceof OpResult.GetDataResult, "getData result " + reads.get(0));
            eq("m2", s(((OpResult.GetDataResult) reads.get(0)).getData()), "multiRead data");
            check(reads.get(1) instanceof OpResult.GetChildrenResult, "getChildren result " + reads.get(1));
            eq(Collections.singletonList("s-0000000001"), ((OpResult.GetChildrenResult) reads.get(1)).getChildren(), "multiRead children");
            check(reads.get(2) instanceof OpResult.ErrorResult, "missing node result " + reads.get(2));
            eq(KeeperException.Code.NONODE.intValue(), ((OpResult.ErrorResult) reads.get(2)).getErr(), "multiRead NONODE");

            // container and TTL creates inside a multi
            List<OpResult> special = zk.multi(Arrays.asList(
                    Op.create(p + "/cont", null, Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER),
                    Op.create(p + "/ttl", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, 600_000)));
            eq(p + "/cont", ((OpResult.CreateResult) special.get(0)).getPath(), "container in multi");
            eq(p + "/ttl", ((OpResult.CreateResult) special.get(1)).getPath(), "ttl in multi");
        }
    }

    static void ephemeralsAndChildCounts() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            ZooKeeper other = zk(r);
            String p = base + "/ephemerals";
            persistent(zk, p, null);
            zk.create(p + "/e1", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            persistent(zk, p + "/sub", null);
            zk.create(p + "/sub/e2", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            persistent(zk, p + "/sub/deep", null);
            other.create(p + "/theirs", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);

            List<String> mine = new ArrayList<>(zk.getEphemerals(p));
            Collections.sort(mine);
            eq(Arrays.asList(p + "/e1", p + "/sub/e2"), mine, "getEphemerals(prefix)");
            List<String> all = new ArrayList<>(zk.getEphemerals());
            check(all.containsAll(mine) && all.size() == 2, "getEphemerals() = " + all);
            eq(Collections.singletonList(p + "/sub/e2"), zk.getEphemerals(p + "/sub"), "getEphemerals(sub)");
            eq(Collections.singletonList(p + "/theirs"), other.getEphemerals(), "other session's ephemerals");

            eq(5, zk.getAllChildrenNumber(p), "getAllChildrenNumber");
            eq(2, zk.getAllChildrenNumber(p + "/sub"), "getAllChildrenNumber(sub)");
            eq(0, zk.getAllChildrenNumber(p + "/e1"), "getAllChildrenNumber(leaf)");
            expectThrows(KeeperException.NoNodeException.class, () -> zk.getAllChildrenNumber(p + "/missing"));

            other.close();
            waitUntil(() -> {
                try {
                    return zk.exists(p + "/theirs", false) == null;
                } catch (Exception e) {
                    return false;
                }
            }, "ephemeral removal after close");
            eq(null, zk.exists(p + "/theirs", false), "ephemeral of a closed session");
        }
    }

    static void whoAmI() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            List<ClientInfo> before = zk.whoAmI();
            eq(1, before.size(), "identities before auth: " + describe(before));
            eq("ip", before.get(0).getAuthScheme(), "scheme");
            eq(addr.substring(0, addr.lastIndexOf(':')), before.get(0).getUser(), "ip identity");
            zk.addAuthInfo("digest", b("alice:pw"));
            List<ClientInfo> after = zk.whoAmI();
            Set<String> ids = new TreeSet<>();
            for (ClientInfo ci : after) {
                ids.add(ci.getAuthScheme() + ":" + ci.getUser());
            }
            eq(new TreeSet<>(Arrays.asList("digest:alice", "ip:" + before.get(0).getUser())), ids, "identities after addAuthInfo");
        }
    }

    static String describe(List<ClientInfo> infos) {
        StringBuilder sb = new StringBuilder();
        for (ClientInfo ci : infos) {
            sb.append(ci.getAuthScheme()).append(':').append(ci.getUser()).append(' ');
        }
        return sb.toString().trim();
    }

    static void persistentWatch() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            ZooKeeper other = zk(r);
            String p = base + "/pwatch";
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            Watcher w = q::add;
            zk.addWatch(p, w, AddWatchMode.PERSISTENT);
            persistent(other, p, null);
            expectEvent(q, EventType.NodeCreated, p);
            other.setData(p, b("1"), -1);
            expectEvent(q, EventType.NodeDataChanged, p);
            other.setData(p, b("2"), -1);
            expectEvent(q, EventType.NodeDataChanged, p);
            persistent(other, p + "/c", null);
            expectEvent(q, EventType.NodeChildrenChanged, p);
            // not recursive: nothing for the grandchild or the child's data
            persistent(other, p + "/c/gc", null);
            other.setData(p + "/c", b("x"), -1);
            expectNoEvent(q, 300);
            other.delete(p + "/c/gc", -1);
            other.delete(p + "/c", -1);
            expectEvent(q, EventType.NodeChildrenChanged, p);
            // a persistent watch survives the node's deletion
            other.delete(p, -1);
            expectEvent(q, EventType.NodeDeleted, p);
            persistent(other, p, null);
            expectEvent(q, EventType.NodeCreated, p);

            zk.removeWatches(p, w, Watcher.WatcherType.Any, false);
            eq(EventType.PersistentWatchRemoved, nextEvent(q, "PersistentWatchRemoved").getType(), "removal event");
            other.setData(p, b("3"), -1);
            expectNoEvent(q, 300);
        }
    }

    static void persistentRecursiveWatch() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            ZooKeeper other = zk(r);
            String p = base + "/rwatch";
            persistent(other, p, null);
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            Watcher w = q::add;
            zk.addWatch(p, w, AddWatchMode.PERSISTENT_RECURSIVE);
            persistent(other, p + "/a", null);
            expectEvent(q, EventType.NodeCreated, p + "/a");
            persistent(other, p + "/a/b", b("1"));
            expectEvent(q, EventType.NodeCreated, p + "/a/b");
            other.setData(p + "/a/b", b("2"), -1);
            expectEvent(q, EventType.NodeDataChanged, p + "/a/b");
            other.setData(p, b("root"), -1);
            expectEvent(q, EventType.NodeDataChanged, p);
            other.delete(p + "/a/b", -1);
            expectEvent(q, EventType.NodeDeleted, p + "/a/b");
            // no NodeChildrenChanged for recursive watches; siblings outside the subtree are silent
            persistent(other, base + "/rwatch-sibling", null);
            expectNoEvent(q, 300);

            // removeWatches on a persistent watch: PersistentWatchRemoved, then silence
            zk.removeWatches(p, w, Watcher.WatcherType.Any, false);
            WatchedEvent removed = nextEvent(q, "PersistentWatchRemoved");
            eq(EventType.PersistentWatchRemoved, removed.getType(), "removal event");
            persistent(other, p + "/after", null);
            expectNoEvent(q, 300);
        }
    }

    static void removeWatches() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            ZooKeeper other = zk(r);
            String p = base + "/rmwatch";
            persistent(zk, p, null);
            BlockingQueue<WatchedEvent> dq = new LinkedBlockingQueue<>();
            BlockingQueue<WatchedEvent> cq = new LinkedBlockingQueue<>();
            Watcher dw = dq::add;
            Watcher cw = cq::add;
            zk.getData(p, dw, null);
            zk.getChildren(p, cw);

            zk.removeWatches(p, dw, Watcher.WatcherType.Data, false);
            WatchedEvent e = nextEvent(dq, "DataWatchRemoved");
            eq(EventType.DataWatchRemoved, e.getType(), "data watch removal event");
            other.setData(p, b("x"), -1);
            expectNoEvent(dq, 300);

            // the child watch is still there
            persistent(other, p + "/c1", null);
            expectEvent(cq, EventType.NodeChildrenChanged, p);

            zk.getChildren(p, cw);
            zk.getData(p, dw, null);
            zk.removeAllWatches(p, Watcher.WatcherType.Any, false);
            Set<EventType> types = new TreeSet<>();
            types.add(nextEvent(cq, "ChildWatchRemoved").getType());
            types.add(nextEvent(dq, "DataWatchRemoved").getType());
            eq(new TreeSet<>(Arrays.asList(EventType.ChildWatchRemoved, EventType.DataWatchRemoved)), types, "removeAllWatches events");
            persistent(other, p + "/c2", null);
            other.setData(p, b("y"), -1);
            expectNoEvent(cq, 300);
            expectNoEvent(dq, 50);

            expectThrows(KeeperException.NoWatcherException.class,
                    () -> zk.removeWatches(p, dw, Watcher.WatcherType.Data, false));
            expectThrows(KeeperException.NoWatcherException.class,
                    () -> zk.removeAllWatches(p, Watcher.WatcherType.Any, false));
        }
    }

    static void digestAcls() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper owner = zk(r);
            ZooKeeper anon = zk(r);
            ZooKeeper friend = zk(r);
            ZooKeeper wrong = zk(r);
            owner.addAuthInfo("digest", b("bob:secret"));
            friend.addAuthInfo("digest", b("bob:secret"));
            wrong.addAuthInfo("digest", b("bob:guess"));
            String p = base + "/acl";
            String digest = DigestAuthenticationProvider.generateDigest("bob:secret");
            eq("bob:fyVmFCwVbTJYrznoSu1koqYEYF0=", digest, "digest of bob:secret");

            // CREATOR_ALL_ACL uses the `auth` scheme: the server substitutes the caller's identities
            owner.create(p, b("classified"), Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
            Stat st = new Stat();
            List<ACL> acl = owner.getACL(p, st);
            eq(Collections.singletonList(new ACL(Perms.ALL, new Id("digest", digest))), acl, "getACL");
            eq(0, st.getAversion(), "aversion");

            expectThrows(KeeperException.NoAuthException.class, () -> anon.getData(p, false, null));
            expectThrows(KeeperException.NoAuthException.class, () -> anon.getACL(p, new Stat()));
            expectThrows(KeeperException.NoAuthException.class, () -> anon.setData(p, b("x"), -1));
            expectThrows(KeeperException.NoAuthException.class,
                    () -> anon.create(p + "/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            expectThrows(KeeperException.NoAuthException.class, () -> wrong.getData(p, false, null));
            eq("classified", s(friend.getData(p, false, null)), "authenticated read");
            friend.setData(p, b("updated"), -1);

            // explicit digest ACL with read-only for the world
            String q = base + "/acl-explicit";
            List<ACL> mixed = Arrays.asList(new ACL(Perms.ALL, new Id("digest", digest)), new ACL(Perms.READ, Ids.ANYONE_ID_UNSAFE));
            anon.create(q, b("public"), mixed, CreateMode.PERSISTENT);
            eq("public", s(anon.getData(q, false, null)), "world-readable");
            expectThrows(KeeperException.NoAuthException.class, () -> anon.setData(q, b("x"), -1));
            friend.setData(q, b("x"), -1);
            // READ without ADMIN: digest ids come back masked
            eq(Arrays.asList(new ACL(Perms.ALL, new Id("digest", "bob:x")), new ACL(Perms.READ, Ids.ANYONE_ID_UNSAFE)),
                    anon.getACL(q, new Stat()), "getACL with READ but no ADMIN (masked)");
            eq(mixed, friend.getACL(q, new Stat()), "getACL with ADMIN");

            // server-side ACL validation
            expectThrows(KeeperException.InvalidACLException.class, () -> anon.create(base + "/acl-auth-unauthenticated", null,
                    Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
            expectThrows(KeeperException.InvalidACLException.class, () -> anon.create(base + "/acl-bad-digest", null,
                    Collections.singletonList(new ACL(Perms.ALL, new Id("digest", "no-colon"))), CreateMode.PERSISTENT));
            expectThrows(KeeperException.InvalidACLException.class, () -> anon.create(base + "/acl-bad-scheme", null,
                    Collections.singletonList(new ACL(Perms.ALL, new Id("nosuchscheme", "x"))), CreateMode.PERSISTENT));

            owner.delete(p, -1);
            friend.delete(q, -1);
        }
    }

    static void sessionExpiry() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper watcher = zk(r);
            Relay relay = r.add(new Relay(addr));
            Zk victim = r.add(new Zk(relay.connectString(), SHORT_SESSION_MS));
            eq(SHORT_SESSION_MS, victim.zk.getSessionTimeout(), "negotiated short session timeout");
            String p = base + "/expiry";
            victim.zk.create(p, null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            check(watcher.exists(p, q::add) != null, "ephemeral visible");
            victim.sessionEvents.clear();
            long cut = System.currentTimeMillis();
            relay.block();
            expectEvent(q, EventType.NodeDeleted, p);
            long took = System.currentTimeMillis() - cut;
            // the session must outlive its connection: expiry comes from the timeout, not the disconnect
            check(took >= SHORT_SESSION_MS / 2, "ephemeral deleted " + took + "ms after the disconnect");
            relay.unblock();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            boolean expired = false;
            while (!expired && System.currentTimeMillis() < deadline) {
                WatchedEvent e = victim.sessionEvents.poll(200, TimeUnit.MILLISECONDS);
                expired = e != null && e.getState() == KeeperState.Expired;
            }
            check(expired, "cut-off client was not told its session expired");
        }
    }

    /** Cuts the relayed client off, runs changes while it is disconnected, then lets it back. */
    static void whileDisconnected(Relay relay, Zk victim, Body changes) throws Exception {
        victim.sessionEvents.clear();
        relay.block();
        WatchedEvent e = nextEvent(victim.sessionEvents, "Disconnected");
        eq(KeeperState.Disconnected, e.getState(), "state after the cut");
        changes.run();
        relay.unblock();
        e = nextEvent(victim.sessionEvents, "SyncConnected after reconnect");
        eq(KeeperState.SyncConnected, e.getState(), "state after reconnect (session must survive)");
        // SyncConnected comes with the connect response; the re-registration of watches
        // (setWatches) is still in flight. One round trip on the same connection orders it.
        victim.zk.exists("/", false);
    }

    static void watchesSurviveReconnect() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper other = zk(r);
            Relay relay = r.add(new Relay(addr));
            Zk victim = r.add(new Zk(relay.connectString(), SESSION_MS));
            ZooKeeper zk = victim.zk;
            long sid = zk.getSessionId();
            String p = base + "/rewatch";
            persistent(zk, p, null);
            persistent(zk, p + "/data", b("1"));
            persistent(zk, p + "/kids", null);
            persistent(zk, p + "/quiet", null);
            persistent(zk, p + "/gone", null);
            zk.create(p + "/eph", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            BlockingQueue<WatchedEvent> quiet = new LinkedBlockingQueue<>();
            // the client also hands connection-state events to every watcher; keep node events
            Watcher w = nodeEventsTo(q);
            zk.getData(p + "/data", w, null);
            eq(null, zk.exists(p + "/born", w), "exists on missing node");
            zk.getChildren(p + "/kids", w);
            zk.getData(p + "/gone", w, null);
            zk.getData(p + "/quiet", nodeEventsTo(quiet), null);
            whileDisconnected(relay, victim, () -> {
                other.setData(p + "/data", b("2"), -1);
                persistent(other, p + "/born", null);
                persistent(other, p + "/kids/k", null);
                other.delete(p + "/gone", -1);
            });
            eq(sid, zk.getSessionId(), "session id after reconnect");
            // changes missed while disconnected are reported right after setWatches
            Set<String> got = new TreeSet<>();
            for (int i = 0; i < 4; i++) {
                WatchedEvent e = nextEvent(q, "catch-up event " + (i + 1) + " of 4 (have " + got + ")");
                got.add(e.getType() + " " + e.getPath());
            }
            eq(new TreeSet<>(Arrays.asList(
                    "NodeDataChanged " + p + "/data",
                    "NodeCreated " + p + "/born",
                    "NodeChildrenChanged " + p + "/kids",
                    "NodeDeleted " + p + "/gone")), got, "catch-up events");
            // an untouched node's watch is re-registered, not fired
            expectNoEvent(quiet, 300);
            other.setData(p + "/quiet", b("now"), -1);
            expectEvent(quiet, EventType.NodeDataChanged, p + "/quiet");
            check(other.exists(p + "/eph", false) != null, "ephemeral survives a reconnect");
        }
    }

    static void persistentWatchSurvivesReconnect() throws Exception {
        try (Resources r = new Resources()) {
            ZooKeeper other = zk(r);
            Relay relay = r.add(new Relay(addr));
            Zk victim = r.add(new Zk(relay.connectString(), SESSION_MS));
            String p = base + "/repersist";
            String rp = base + "/repersist-recursive";
            persistent(other, p, null);
            persistent(other, rp, null);
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            BlockingQueue<WatchedEvent> rq = new LinkedBlockingQueue<>();
            BlockingQueue<WatchedEvent> plain = new LinkedBlockingQueue<>();
            victim.zk.addWatch(p, nodeEventsTo(q), AddWatchMode.PERSISTENT);
            victim.zk.addWatch(rp, nodeEventsTo(rq), AddWatchMode.PERSISTENT_RECURSIVE);
            // a standard watch too: all three kinds go into one re-registration (setWatches2)
            victim.zk.getData(base, nodeEventsTo(plain), null);
            persistent(other, p + "/before", null);
            expectEvent(q, EventType.NodeChildrenChanged, p, " (before the disconnect)");
            persistent(other, rp + "/before", null);
            expectEvent(rq, EventType.NodeCreated, rp + "/before", " (before the disconnect)");
            // nothing the watches cover changes while the client is away
            whileDisconnected(relay, victim, () -> other.create(base + "/repersist-unrelated", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            persistent(other, p + "/after", null);
            expectEvent(q, EventType.NodeChildrenChanged, p, " (after the reconnect)");
            other.setData(p, b("x"), -1);
            expectEvent(q, EventType.NodeDataChanged, p, " (after the reconnect)");
            persistent(other, rp + "/after", null);
            expectEvent(rq, EventType.NodeCreated, rp + "/after", " (after the reconnect)");
            persistent(other, rp + "/after/deep", b("1"));
            expectEvent(rq, EventType.NodeCreated, rp + "/after/deep", " (after the reconnect)");
            other.setData(base, b("base"), -1);
            expectEvent(plain, EventType.NodeDataChanged, base, " (after the reconnect)");
            expectNoEvent(q, 100);
            expectNoEvent(rq, 100);
        }
    }

    static Watcher nodeEventsTo(BlockingQueue<WatchedEvent> q) {
        return e -> {
            if (e.getType() != EventType.None) {
                q.add(e);
            }
        };
    }

    // --- Curator recipes ------------------------------------------------------------------------

    static void leaderLatch() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/latch";
            List<LeaderLatch> latches = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                LeaderLatch l = new LeaderLatch(curator(r), p, "latch-" + i);
                latches.add(l);
                l.start();
                // start in order so that the sequence numbers follow the index
                final int n = i + 1;
                waitUntil(() -> {
                    try {
                        return l.getParticipants().size() == n;
                    } catch (Exception e) {
                        return false;
                    }
                }, "participant " + i + " registered");
            }
            check(latches.get(0).await(WAIT_MS, TimeUnit.MILLISECONDS), "first latch did not become leader");
            for (int i = 0; i < 3; i++) {
                waitUntil(oneLeader(latches), "exactly one leader");
                LeaderLatch leader = latches.get(i);
                check(leader.hasLeadership(), "latch-" + i + " should lead");
                for (LeaderLatch l : latches) {
                    if (l.getState() == LeaderLatch.State.STARTED) {
                        eq("latch-" + i, l.getLeader().getId(), "leader seen by " + l.getId());
                    }
                }
                leader.close();
                if (i < 2) {
                    check(latches.get(i + 1).await(WAIT_MS, TimeUnit.MILLISECONDS), "leadership did not pass to latch-" + (i + 1));
                }
            }
            eq(Collections.emptyList(), childrenLeft(curator(r), p), "latch nodes left behind");
        }
    }

    static BooleanSupplier oneLeader(List<LeaderLatch> latches) {
        return () -> {
            int n = 0;
            for (LeaderLatch l : latches) {
                if (l.getState() == LeaderLatch.State.STARTED && l.hasLeadership()) {
                    n++;
                }
            }
            return n == 1;
        };
    }

    static void leaderLatchFailoverOnSessionExpiry() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/latch-expiry";
            Relay relay = r.add(new Relay(addr));
            CuratorFramework fragile = curator(r, relay.connectString(), SHORT_SESSION_MS);
            LeaderLatch first = r.add(new LeaderLatch(fragile, p, "fragile"));
            first.start();
            check(first.await(WAIT_MS, TimeUnit.MILLISECONDS), "first latch did not lead");
            LeaderLatch second = r.add(new LeaderLatch(curator(r), p, "steady"));
            second.start();
            waitUntil(() -> {
                try {
                    return second.getParticipants().size() == 2;
                } catch (Exception e) {
                    return false;
                }
            }, "second participant");
            check(!second.hasLeadership(), "second latch leads too early");
            relay.block();
            check(second.await(WAIT_MS + SHORT_SESSION_MS, TimeUnit.MILLISECONDS), "leadership did not move after session loss");
            check(!first.hasLeadership(), "cut-off latch still believes it leads");
            eq("steady", second.getLeader().getId(), "leader id");
        }
    }

    static void leaderSelector() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/selector";
            List<String> order = new CopyOnWriteArrayList<>();
            AtomicInteger current = new AtomicInteger();
            AtomicInteger maxCurrent = new AtomicInteger();
            CountDownLatch done = new CountDownLatch(3);
            for (int i = 0; i < 3; i++) {
                final String id = "selector-" + i;
                LeaderSelector sel = new LeaderSelector(curator(r), p, new LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework client) throws Exception {
                        int now = current.incrementAndGet();
                        maxCurrent.accumulateAndGet(now, Math::max);
                        order.add(id);
                        Thread.sleep(150);
                        current.decrementAndGet();
                        done.countDown();
                    }
                });
                sel.setId(id);
                r.add(sel);
                sel.start();
            }
            check(done.await(WAIT_MS, TimeUnit.MILLISECONDS), "not every selector led: " + order);
            eq(3, new TreeSet<>(order).size(), "distinct leaders " + order);
            eq(3, order.size(), "leadership count (no requeue) " + order);
            eq(1, maxCurrent.get(), "concurrent leaders");
        }
    }

    static void interProcessMutex() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/mutex";
            AtomicInteger inside = new AtomicInteger();
            AtomicInteger maxInside = new AtomicInteger();
            AtomicInteger total = new AtomicInteger();
            List<String> errors = new CopyOnWriteArrayList<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                InterProcessMutex m = new InterProcessMutex(curator(r), p);
                Thread t = new Thread(() -> {
                    try {
                        for (int k = 0; k < 3; k++) {
                            if (!m.acquire(WAIT_MS, TimeUnit.MILLISECONDS)) {
                                errors.add("acquire timed out");
                                return;
                            }
                            try {
                                maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                                Thread.sleep(10);
                                inside.decrementAndGet();
                                total.incrementAndGet();
                            } finally {
                                m.release();
                            }
                        }
                    } catch (Exception e) {
                        errors.add(e.toString());
                    }
                });
                threads.add(t);
            }
            threads.forEach(Thread::start);
            join(threads, "mutex worker");
            eq(Collections.emptyList(), errors, "worker errors");
            eq(12, total.get(), "critical sections");
            eq(1, maxInside.get(), "maximum holders at once");

            InterProcessMutex a = new InterProcessMutex(curator(r), p);
            InterProcessMutex bm = new InterProcessMutex(curator(r), p);
            check(a.acquire(WAIT_MS, TimeUnit.MILLISECONDS), "a acquires");
            check(a.acquire(WAIT_MS, TimeUnit.MILLISECONDS), "a re-enters");
            AtomicReference<Boolean> got = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    got.set(bm.acquire(300, TimeUnit.MILLISECONDS));
                } catch (Exception e) {
                    got.set(null);
                }
            });
            t.start();
            join(Collections.singletonList(t), "contender");
            eq(Boolean.FALSE, got.get(), "b acquire while a holds");
            a.release();
            a.release();
            Thread t2 = new Thread(() -> {
                try {
                    got.set(bm.acquire(WAIT_MS, TimeUnit.MILLISECONDS));
                    bm.release();
                } catch (Exception e) {
                    got.set(null);
                }
            });
            t2.start();
            join(Collections.singletonList(t2), "contender");
            eq(Boolean.TRUE, got.get(), "b acquire after a released");
        }
    }

    static void readWriteLock() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/rwlock";
            // three lock objects on three clients: each one is an independent participant
            InterProcessReadWriteLock l1 = new InterProcessReadWriteLock(curator(r), p);
            InterProcessReadWriteLock l2 = new InterProcessReadWriteLock(curator(r), p);
            InterProcessReadWriteLock l3 = new InterProcessReadWriteLock(curator(r), p);
            check(l1.readLock().acquire(WAIT_MS, TimeUnit.MILLISECONDS), "reader 1");
            check(l2.readLock().acquire(WAIT_MS, TimeUnit.MILLISECONDS), "reader 2 alongside reader 1");
            check(!l3.writeLock().acquire(300, TimeUnit.MILLISECONDS), "writer must wait for readers");
            l1.readLock().release();
            check(!l3.writeLock().acquire(300, TimeUnit.MILLISECONDS), "writer must wait for the last reader");
            l2.readLock().release();
            check(l3.writeLock().acquire(WAIT_MS, TimeUnit.MILLISECONDS), "writer after readers left");
            check(!l1.readLock().acquire(300, TimeUnit.MILLISECONDS), "reader must wait for writer");
            check(!l2.writeLock().acquire(300, TimeUnit.MILLISECONDS), "second writer must wait");
            // the writer may also take the read lock (downgrade)
            check(l3.readLock().acquire(WAIT_MS, TimeUnit.MILLISECONDS), "writer takes the read lock");
            l3.writeLock().release();
            check(l1.readLock().acquire(WAIT_MS, TimeUnit.MILLISECONDS), "reader after the writer released");
            l1.readLock().release();
            l3.readLock().release();
            eq(Collections.emptyList(), childrenLeft(curator(r), p), "lock nodes left behind");
        }
    }

    /**
     * The children still under a recipe's parent. Curator creates that parent as a container,
     * which the server may reap as soon as it is empty (zkd checks every second by default,
     * ZooKeeper every minute), so a parent already gone means nothing was left behind.
     */
    static List<String> childrenLeft(CuratorFramework c, String p) throws Exception {
        try {
            return c.getChildren().forPath(p);
        } catch (KeeperException.NoNodeException gone) {
            return Collections.emptyList();
        }
    }

    static void semaphores() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/semaphore";
            InterProcessSemaphoreV2 s1 = new InterProcessSemaphoreV2(curator(r), p, 2);
            InterProcessSemaphoreV2 s2 = new InterProcessSemaphoreV2(curator(r), p, 2);
            InterProcessSemaphoreV2 s3 = new InterProcessSemaphoreV2(curator(r), p, 2);
            Lease a = s1.acquire(WAIT_MS, TimeUnit.MILLISECONDS);
            Lease bl = s2.acquire(WAIT_MS, TimeUnit.MILLISECONDS);
            check(a != null && bl != null, "two leases available");
            eq(2, s3.getParticipantNodes().size(), "participant nodes");
            eq(null, s3.acquire(300, TimeUnit.MILLISECONDS), "third lease while two are held");
            s1.returnLease(a);
            Lease c = s3.acquire(WAIT_MS, TimeUnit.MILLISECONDS);
            check(c != null, "third lease after one was returned");
            s2.returnLease(bl);
            s3.returnLease(c);

            String mp = base + "/semaphore-mutex";
            InterProcessSemaphoreMutex m1 = new InterProcessSemaphoreMutex(curator(r), mp);
            InterProcessSemaphoreMutex m2 = new InterProcessSemaphoreMutex(curator(r), mp);
            check(m1.acquire(WAIT_MS, TimeUnit.MILLISECONDS), "semaphore mutex 1");
            check(!m2.acquire(300, TimeUnit.MILLISECONDS), "semaphore mutex 2 while 1 holds");
            m1.release();
            check(m2.acquire(WAIT_MS, TimeUnit.MILLISECONDS), "semaphore mutex 2 after release");
            m2.release();
        }
    }

    static void barriers() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/barrier";
            DistributedBarrier setter = new DistributedBarrier(curator(r), p);
            DistributedBarrier waiter = new DistributedBarrier(curator(r), p);
            setter.setBarrier();
            check(!waiter.waitOnBarrier(300, TimeUnit.MILLISECONDS), "waitOnBarrier must time out while set");
            AtomicReference<Object> result = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    result.set(waiter.waitOnBarrier(WAIT_MS, TimeUnit.MILLISECONDS));
                } catch (Exception e) {
                    result.set(e);
                }
            });
            t.start();
            Thread.sleep(200);
            check(t.isAlive(), "waiter passed a set barrier");
            setter.removeBarrier();
            join(Collections.singletonList(t), "barrier waiter");
            eq(Boolean.TRUE, result.get(), "waiter released");

            String dp = base + "/double-barrier";
            List<Thread> threads = new ArrayList<>();
            List<String> log = new CopyOnWriteArrayList<>();
            CountDownLatch twoWaiting = new CountDownLatch(2);
            for (int i = 0; i < 3; i++) {
                DistributedDoubleBarrier db = new DistributedDoubleBarrier(curator(r), dp, 3);
                final int n = i;
                threads.add(new Thread(() -> {
                    try {
                        if (n < 2) {
                            twoWaiting.countDown();
                        }
                        log.add("enter:" + db.enter(WAIT_MS, TimeUnit.MILLISECONDS));
                        log.add("leave:" + db.leave(WAIT_MS, TimeUnit.MILLISECONDS));
                    } catch (Exception e) {
                        log.add("error:" + e);
                    }
                }));
            }
            threads.get(0).start();
            threads.get(1).start();
            twoWaiting.await(WAIT_MS, TimeUnit.MILLISECONDS);
            Thread.sleep(300);
            eq(Collections.emptyList(), log, "entered before all members arrived");
            threads.get(2).start();
            join(threads, "double barrier member");
            List<String> sorted = new ArrayList<>(log);
            Collections.sort(sorted);
            eq(Arrays.asList("enter:true", "enter:true", "enter:true", "leave:true", "leave:true", "leave:true"), sorted, "enter/leave results");
        }
    }

    static void distributedQueue() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/queue";
            BlockingQueue<String> consumed = new LinkedBlockingQueue<>();
            QueueSerializer<String> ser = new QueueSerializer<String>() {
                @Override
                public byte[] serialize(String item) {
                    return b(item);
                }

                @Override
                public String deserialize(byte[] bytes) {
                    return s(bytes);
                }
            };
            QueueConsumer<String> consumer = new QueueConsumer<String>() {
                @Override
                public void consumeMessage(String message) {
                    consumed.add(message);
                }

                @Override
                public void stateChanged(CuratorFramework client, ConnectionState newState) {
                }
            };
            DistributedQueue<String> producer = QueueBuilder.builder(curator(r), null, ser, p).buildQueue();
            r.add(producer);
            producer.start();
            DistributedQueue<String> reader = QueueBuilder.builder(curator(r), consumer, ser, p).buildQueue();
            r.add(reader);
            reader.start();
            for (String item : Arrays.asList("alpha", "beta", "gamma")) {
                producer.put(item);
            }
            List<String> got = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                String item = consumed.poll(WAIT_MS, TimeUnit.MILLISECONDS);
                check(item != null, "only consumed " + got);
                got.add(item);
            }
            eq(Arrays.asList("alpha", "beta", "gamma"), got, "consumed in order");

            String sp = base + "/simple-queue";
            SimpleDistributedQueue q1 = new SimpleDistributedQueue(curator(r), sp);
            SimpleDistributedQueue q2 = new SimpleDistributedQueue(curator(r), sp);
            eq(null, q2.poll(), "poll on empty queue");
            check(q1.offer(b("one")), "offer");
            check(q1.offer(b("two")), "offer");
            eq("one", s(q2.take()), "take");
            eq("two", s(q2.poll(WAIT_MS, TimeUnit.MILLISECONDS)), "poll with timeout");
            eq(null, q2.poll(200, TimeUnit.MILLISECONDS), "poll on drained queue");
            AtomicReference<byte[]> taken = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    taken.set(q2.poll(WAIT_MS, TimeUnit.MILLISECONDS));
                } catch (Exception e) {
                    taken.set(null);
                }
            });
            t.start();
            Thread.sleep(100);
            q1.offer(b("late"));
            join(Collections.singletonList(t), "blocked consumer");
            eq("late", s(taken.get()), "blocked consumer woken by offer");
        }
    }

    static void curatorCache() throws Exception {
        try (Resources r = new Resources()) {
            CuratorFramework c = curator(r);
            CuratorFramework other = curator(r);
            String p = base + "/cache";
            c.create().forPath(p, b("root"));
            c.create().forPath(p + "/existing", b("e"));
            BlockingQueue<String> events = new LinkedBlockingQueue<>();
            CountDownLatch initialized = new CountDownLatch(1);
            CuratorCache cache = CuratorCache.build(c, p);
            r.add(cache);
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forCreates(n -> events.add("create " + n.getPath() + " " + s(n.getData())))
                    .forChanges((before, after) -> events.add("change " + after.getPath() + " " + s(before.getData()) + "->" + s(after.getData())))
                    .forDeletes(n -> events.add("delete " + n.getPath()))
                    .forInitialized(initialized::countDown)
                    .build());
            cache.start();
            check(initialized.await(WAIT_MS, TimeUnit.MILLISECONDS), "cache not initialized");
            Set<String> initial = new TreeSet<>();
            initial.add(events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
            initial.add(events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
            eq(new TreeSet<>(Arrays.asList("create " + p + " root", "create " + p + "/existing e")), initial, "initial events");

            other.create().forPath(p + "/new", b("n"));
            eq("create " + p + "/new n", events.poll(WAIT_MS, TimeUnit.MILLISECONDS), "create event");
            other.setData().forPath(p + "/new", b("n2"));
            eq("change " + p + "/new n->n2", events.poll(WAIT_MS, TimeUnit.MILLISECONDS), "change event");
            other.create().forPath(p + "/new/deep", b("d"));
            eq("create " + p + "/new/deep d", events.poll(WAIT_MS, TimeUnit.MILLISECONDS), "deep create event");
            other.delete().deletingChildrenIfNeeded().forPath(p + "/new");
            Set<String> deletes = new TreeSet<>();
            deletes.add(events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
            deletes.add(events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
            eq(new TreeSet<>(Arrays.asList("delete " + p + "/new", "delete " + p + "/new/deep")), deletes, "delete events");
            eq("e", s(cache.get(p + "/existing").map(cd -> cd.getData()).orElse(null)), "cached data");
            eq(2, cache.size(), "cache size");
        }
    }

    static void sharedCount() throws Exception {
        try (Resources r = new Resources()) {
            String p = base + "/count";
            SharedCount a = r.add(new SharedCount(curator(r), p, 10));
            SharedCount bc = r.add(new SharedCount(curator(r), p, 99));
            BlockingQueue<Integer> seen = new LinkedBlockingQueue<>();
            bc.addListener(new SharedCountListener() {
                @Override
                public void countHasChanged(SharedCountReader reader, int newCount) {
                    seen.add(newCount);
                }

                @Override
                public void stateChanged(CuratorFramework client, ConnectionState newState) {
                }
            });
            a.start();
            bc.start();
            eq(10, bc.getCount(), "seed of the first starter wins");
            a.setCount(42);
            eq(Integer.valueOf(42), seen.poll(WAIT_MS, TimeUnit.MILLISECONDS), "listener saw the change");
            eq(42, bc.getCount(), "other instance's value");
            VersionedValue<Integer> v = bc.getVersionedValue();
            check(bc.trySetCount(v, 43), "trySetCount with the current version");
            check(!bc.trySetCount(v, 44), "trySetCount with a stale version must fail");
            waitUntil(() -> a.getCount() == 43, "first instance sees 43");
            eq(43, a.getCount(), "value");
        }
    }

    static void curatorTransactions() throws Exception {
        try (Resources r = new Resources()) {
            CuratorFramework c = curator(r);
            String p = base + "/ctx";
            c.create().forPath(p, b("v0"));
            CuratorOp create = c.transactionOp().create().forPath(p + "/a", b("a"));
            CuratorOp set = c.transactionOp().setData().withVersion(0).forPath(p, b("v1"));
            CuratorOp check = c.transactionOp().check().withVersion(0).forPath(p + "/a");
            CuratorOp del = c.transactionOp().delete().forPath(p + "/a");
            List<CuratorTransactionResult> res = c.transaction().forOperations(create, set, check, del);
            eq(4, res.size(), "results");
            eq(OperationType.CREATE + " " + p + "/a", res.get(0).getType() + " " + res.get(0).getResultPath(), "create result");
            eq(OperationType.SET_DATA, res.get(1).getType(), "setData result type");
            eq(1, res.get(1).getResultStat().getVersion(), "setData result version");
            eq(OperationType.CHECK, res.get(2).getType(), "check result type");
            eq(OperationType.DELETE, res.get(3).getType(), "delete result type");
            eq("v1", s(c.getData().forPath(p)), "data after transaction");
            eq(null, c.checkExists().forPath(p + "/a"), "deleted inside the transaction");

            CuratorOp ok = c.transactionOp().create().forPath(p + "/b");
            CuratorOp bad = c.transactionOp().setData().withVersion(7).forPath(p, b("nope"));
            CuratorOp after = c.transactionOp().delete().forPath(p + "/b");
            KeeperException.BadVersionException e = expectThrows(KeeperException.BadVersionException.class,
                    () -> c.transaction().forOperations(ok, bad, after));
            eq(KeeperException.Code.BADVERSION, e.code(), "failing op's code");
            List<OpResult> results = e.getResults();
            check(results != null && results.size() == 3, "results attached to the exception: " + results);
            eq(KeeperException.Code.BADVERSION.intValue(), ((OpResult.ErrorResult) results.get(1)).getErr(), "failing op result");
            eq(null, c.checkExists().forPath(p + "/b"), "rolled-back create");

            // background: per-op error codes in the event
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<List<CuratorTransactionResult>> bgResults = new AtomicReference<>();
            AtomicInteger bgCode = new AtomicInteger(999);
            c.transaction().inBackground((cl, ev) -> {
                bgCode.set(ev.getResultCode());
                bgResults.set(ev.getOpResults());
                done.countDown();
            }).forOperations(
                    c.transactionOp().create().forPath(p + "/c"),
                    c.transactionOp().delete().forPath(p + "/missing"));
            check(done.await(WAIT_MS, TimeUnit.MILLISECONDS), "background transaction result");
            eq(KeeperException.Code.NONODE.intValue(), bgCode.get(), "background result code");
            List<CuratorTransactionResult> br = bgResults.get();
            check(br != null && br.size() == 2, "background op results " + br);
            eq(0, br.get(0).getError(), "background op 0 error");
            eq(KeeperException.Code.NONODE.intValue(), br.get(1).getError(), "background op 1 error");
        }
    }

    static void curatorCreateModes() throws Exception {
        try (Resources r = new Resources()) {
            CuratorFramework c = curator(r);
            String p = base + "/ccreate/a/b";
            // parents as containers (createContainer), leaf with a TTL (createTTL)
            c.create().withTtl(600_000).creatingParentContainersIfNeeded().withMode(CreateMode.PERSISTENT_WITH_TTL).forPath(p, b("ttl"));
            eq("ttl", s(c.getData().forPath(p)), "ttl node data");
            eq(0L, c.checkExists().forPath(base + "/ccreate/a").getEphemeralOwner(), "container parent owner");
            Stat st = new Stat();
            String path = c.create().storingStatIn(st).withProtection().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(base + "/ccreate/p-", b("x"));
            check(path.startsWith(base + "/ccreate/_c_") && path.matches(".*-p-\\d{10}$"), "protected name " + path);
            eq(c.getZookeeperClient().getZooKeeper().getSessionId(), st.getEphemeralOwner(), "ephemeral owner via storingStatIn");
            c.delete().deletingChildrenIfNeeded().forPath(base + "/ccreate");
            eq(null, c.checkExists().forPath(base + "/ccreate"), "deletingChildrenIfNeeded");
        }
    }

    static void curatorPersistentWatcher() throws Exception {
        try (Resources r = new Resources()) {
            CuratorFramework c = curator(r);
            CuratorFramework other = curator(r);
            String p = base + "/cpw";
            c.create().forPath(p);
            BlockingQueue<WatchedEvent> q = new LinkedBlockingQueue<>();
            PersistentWatcher w = r.add(new PersistentWatcher(c, p, true));
            CountDownLatch reset = new CountDownLatch(1);
            w.getResetListenable().addListener(reset::countDown);
            w.getListenable().addListener(q::add);
            w.start();
            check(reset.await(WAIT_MS, TimeUnit.MILLISECONDS), "persistent watch not established");
            other.create().forPath(p + "/x", b("1"));
            expectEvent(q, EventType.NodeCreated, p + "/x");
            other.create().forPath(p + "/x/y");
            expectEvent(q, EventType.NodeCreated, p + "/x/y");
            other.setData().forPath(p + "/x", b("2"));
            expectEvent(q, EventType.NodeDataChanged, p + "/x");
            other.delete().deletingChildrenIfNeeded().forPath(p + "/x");
            Set<String> deleted = new TreeSet<>();
            for (int i = 0; i < 2; i++) {
                WatchedEvent e = nextEvent(q, "NodeDeleted");
                deleted.add(e.getType() + " " + e.getPath());
            }
            eq(new TreeSet<>(Arrays.asList("NodeDeleted " + p + "/x", "NodeDeleted " + p + "/x/y")), deleted, "delete events");
        }
    }

    static void curatorPersistentTtlNode() throws Exception {
        try (Resources r = new Resources()) {
            CuratorFramework c = curator(r);
            String p = base + "/ttlnode";
            // the recipe touches its TTL child every ttl/2 ms, so keep the ttl short
            PersistentTtlNode node = r.add(new PersistentTtlNode(c, p, 2_000, b("alive")));
            node.start();
            check(node.waitForInitialCreate(WAIT_MS, TimeUnit.MILLISECONDS), "initial create");
            eq("alive", s(c.getData().forPath(p)), "node data");
            eq(0L, c.checkExists().forPath(p).getEphemeralOwner(), "container node owner");
            waitUntil(() -> {
                try {
                    return c.checkExists().forPath(p + "/" + PersistentTtlNode.DEFAULT_CHILD_NODE_NAME) != null;
                } catch (Exception e) {
                    return false;
                }
            }, "touch child (TTL node)");
            node.setData(b("updated"));
            waitUntil(() -> {
                try {
                    return "updated".equals(s(c.getData().forPath(p)));
                } catch (Exception e) {
                    return false;
                }
            }, "updated data");
        }
    }

    // --- runner ---------------------------------------------------------------------------------

    static final class Check {
        final String name;
        final Body body;

        Check(String name, Body body) {
            this.name = name;
            this.body = body;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java JavaClientSuite HOST:PORT");
            System.exit(2);
        }
        addr = args[0];
        base = "/java-suite-" + ProcessHandle.current().pid() + "-" + ThreadLocalRandom.current().nextInt(1 << 30);
        long overallSec = Long.parseLong(System.getenv().getOrDefault("JAVA_SUITE_TIMEOUT", "180"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(overallSec * 1000);
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL watchdog: suite did not finish within " + overallSec + "s");
            System.out.println(passed.get() + " passed, " + (failed.get() + 1) + " failed");
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        List<Check> checks = Arrays.asList(
                new Check("connect_and_session_timeout", JavaClientSuite::connectAndSessionTimeout),
                new Check("create_modes", JavaClientSuite::createModes),
                new Check("stat_fields", JavaClientSuite::statFields),
                new Check("exists_watch_fires_node_created", JavaClientSuite::existsWatchFiresNodeCreated),
                new Check("child_watch_fires_node_children_changed", JavaClientSuite::childWatchFiresNodeChildrenChanged),
                new Check("multi_results_and_failure_codes", JavaClientSuite::multiResults),
                new Check("get_ephemerals_and_all_children_number", JavaClientSuite::ephemeralsAndChildCounts),
                new Check("who_am_i", JavaClientSuite::whoAmI),
                new Check("add_watch_persistent", JavaClientSuite::persistentWatch),
                new Check("add_watch_persistent_recursive", JavaClientSuite::persistentRecursiveWatch),
                new Check("remove_watches", JavaClientSuite::removeWatches),
                new Check("digest_acls", JavaClientSuite::digestAcls),
                new Check("session_expiry", JavaClientSuite::sessionExpiry),
                new Check("watches_survive_reconnect", JavaClientSuite::watchesSurviveReconnect),
                new Check("persistent_watch_survives_reconnect", JavaClientSuite::persistentWatchSurvivesReconnect),
                new Check("curator_leader_latch", JavaClientSuite::leaderLatch),
                new Check("curator_leader_latch_failover_on_expiry", JavaClientSuite::leaderLatchFailoverOnSessionExpiry),
                new Check("curator_leader_selector", JavaClientSuite::leaderSelector),
                new Check("curator_inter_process_mutex", JavaClientSuite::interProcessMutex),
                new Check("curator_read_write_lock", JavaClientSuite::readWriteLock),
                new Check("curator_semaphores", JavaClientSuite::semaphores),
                new Check("curator_barriers", JavaClientSuite::barriers),
                new Check("curator_queues", JavaClientSuite::distributedQueue),
                new Check("curator_cache", JavaClientSuite::curatorCache),
                new Check("curator_shared_count", JavaClientSuite::sharedCount),
                new Check("curator_transactions", JavaClientSuite::curatorTransactions),
                new Check("curator_create_modes", JavaClientSuite::curatorCreateModes),
                new Check("curator_persistent_watcher", JavaClientSuite::curatorPersistentWatcher),
                new Check("curator_persistent_ttl_node", JavaClientSuite::curatorPersistentTtlNode));

        try (Resources r = new Resources()) {
            ZooKeeper setup = zk(r);
            persistent(setup, base, null);
        } catch (Throwable t) {
            System.out.println("FAIL setup: " + t);
            System.out.println("0 passed, 1 failed");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }

        // JAVA_SUITE_ONLY=regex runs a subset (for debugging)
        String only = System.getenv("JAVA_SUITE_ONLY");
        ExecutorService exec = Executors.newSingleThreadExecutor(daemonFactory());
        for (Check c : checks) {
            if (only != null && !c.name.matches(only)) {
                continue;
            }
            long started = System.nanoTime();
            Future<?> f = exec.submit(() -> {
                c.body.run();
                return null;
            });
            String failure = null;
            try {
                f.get(CHECK_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                f.cancel(true);
                failure = "timed out after " + CHECK_TIMEOUT_MS + "ms";
                exec.shutdownNow();
                exec = Executors.newSingleThreadExecutor(daemonFactory());
            } catch (java.util.concurrent.ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof CheckFailed) {
                    failure = cause.getMessage();
                } else {
                    StackTraceElement where = null;
                    for (StackTraceElement el : cause.getStackTrace()) {
                        if (el.getClassName().startsWith(JavaClientSuite.class.getName())) {
                            where = el;
                            break;
                        }
                    }
                    failure = cause + (where == null ? "" : " (at line " + where.getLineNumber() + ")");
                }
            }
            if (failure == null) {
                passed.incrementAndGet();
                System.out.println("PASS " + c.name);
            } else {
                failed.incrementAndGet();
                System.out.println("FAIL " + c.name + ": " + failure.replace('\n', ' '));
            }
            System.out.flush();
            if (System.getenv("JAVA_SUITE_TIMINGS") != null) {
                System.err.println("  " + c.name + " took " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + "ms");
            }
        }

        try (Resources r = new Resources()) {
            ZooKeeper zk = zk(r);
            // nodes left behind by a failed ACL check are only deletable by their owner
            zk.addAuthInfo("digest", b("bob:secret"));
            org.apache.zookeeper.ZKUtil.deleteRecursive(zk, base);
        } catch (Throwable t) {
            System.err.println("cleanup of " + base + " failed: " + t);
        }
        System.out.println(passed.get() + " passed, " + failed.get() + " failed");
        System.out.flush();
        Runtime.getRuntime().halt(failed.get() == 0 ? 0 : 1);
    }

    static java.util.concurrent.ThreadFactory daemonFactory() {
        return runnable -> {
            Thread t = new Thread(runnable, "check");
            t.setDaemon(true);
            return t;
        };
    }

    private JavaClientSuite() {
    }
}
