// Drives the unmodified ZooKeeper Java client over the secure transports: TLS with a client
// certificate (Netty socket) and SASL DIGEST-MD5 with a JAAS DigestLoginModule.
//
//   java SecureClient tls  HOST:PORT PKI_DIR CLIENT_DN
//   java SecureClient sasl HOST:PORT      (needs -Djava.security.auth.login.config=FILE with
//                                          sections Client (bob), Alice and Wrong)
//   java SecureClient enforce HOST:PORT   (the same, against a server enforcing sasl)
//
// Prints `PASS name` / `FAIL name: reason` per check and `N passed, M failed`; exit 1 on any
// failure.

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.ZKClientConfig;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;

public class SecureClient {
    /** Upper bound of one wait; a wait ends as soon as its event arrives, so this only keeps a
     *  broken server from hanging the run (it is never reached on a loaded machine either). */
    static final long WAIT_S = 120;
    static int passed = 0, failed = 0;
    static final String BASE = "/java-secure-" + ProcessHandle.current().pid();

    interface Check { void run() throws Exception; }

    static void check(String name, Check c) {
        try {
            c.run();
            passed++;
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + name + ": " + t);
        }
        System.out.flush();
    }

    static void expect(boolean cond, String msg) {
        if (!cond) throw new AssertionError(msg);
    }

    /** A client and the states it went through. */
    static final class Client {
        final ZooKeeper zk;
        final LinkedBlockingQueue<Watcher.Event.KeeperState> states = new LinkedBlockingQueue<>();
        Client(String addr, ZKClientConfig cfg) throws Exception {
            zk = new ZooKeeper(addr, 30000, e -> {
                if (e.getType() == Watcher.Event.EventType.None) states.add(e.getState());
            }, cfg);
        }
        /** Waits for `want`; fails on an earlier AuthFailed/Closed or the time limit. */
        boolean await(Watcher.Event.KeeperState want) throws InterruptedException {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (System.nanoTime() < end) {
                Watcher.Event.KeeperState s = states.poll(200, TimeUnit.MILLISECONDS);
                if (s == want) return true;
                if (s == Watcher.Event.KeeperState.AuthFailed) return false;
            }
            return false;
        }
        void close() { try { zk.close(); } catch (Exception e) { } }
    }

    static ZKClientConfig tlsConfig(String pki, String identity) throws Exception {
        ZKClientConfig c = new ZKClientConfig();
        c.setProperty("zookeeper.clientCnxnSocket", "org.apache.zookeeper.ClientCnxnSocketNetty");
        c.setProperty("zookeeper.client.secure", "true");
        c.setProperty("zookeeper.ssl.trustStore.location", pki + "/ca.pem");
        c.setProperty("zookeeper.ssl.trustStore.type", "PEM");
        c.setProperty("zookeeper.ssl.keyStore.location", pki + "/" + identity + "-combined.pem");
        c.setProperty("zookeeper.ssl.keyStore.type", "PEM");
        c.setProperty("zookeeper.sasl.client", "false");
        return c;
    }

    static List<String> whoAmI(ZooKeeper zk) throws Exception {
        List<String> out = new ArrayList<>();
        for (ClientInfo i : zk.whoAmI()) out.add(i.getAuthScheme() + ":" + i.getUser());
        return out;
    }

    static void tls(String addr, String pki, String dn) throws Exception {
        final Client[] me = new Client[1];
        check("tls: connects with the CA's client certificate", () -> {
            me[0] = new Client(addr, tlsConfig(pki, "client1"));
            expect(me[0].await(Watcher.Event.KeeperState.SyncConnected), "no SyncConnected");
        });
        if (me[0] == null) return;
        ZooKeeper zk = me[0].zk;
        check("tls: whoAmI shows the x509 identity", () -> {
            List<String> ids = whoAmI(zk);
            expect(ids.contains("x509:" + dn), "whoAmI = " + ids);
        });
        List<ACL> mine = Collections.singletonList(new ACL(ZooDefs.Perms.ALL, new Id("x509", dn)));
        check("tls: create, read, update and watch under an x509 ACL", () -> {
            zk.create(BASE, "v1".getBytes(), mine, CreateMode.PERSISTENT);
            expect(new String(zk.getData(BASE, false, null)).equals("v1"), "data");
            CountDownLatch fired = new CountDownLatch(1);
            zk.getData(BASE, e -> fired.countDown(), null);
            zk.setData(BASE, "v2".getBytes(), -1);
            expect(fired.await(WAIT_S, TimeUnit.SECONDS), "watch did not fire");
            zk.create(BASE + "/e", new byte[0], mine, CreateMode.EPHEMERAL_SEQUENTIAL);
            expect(zk.getChildren(BASE, false).size() == 1, "children");
            expect(zk.getACL(BASE, null).equals(mine), "acl " + zk.getACL(BASE, null));
        });
        check("tls: another certificate is refused by the x509 ACL", () -> {
            Client other = new Client(addr, tlsConfig(pki, "client2"));
            try {
                expect(other.await(Watcher.Event.KeeperState.SyncConnected), "no SyncConnected");
                readRefused(other.zk, BASE, KeeperException.NoAuthException.class);
            } finally {
                other.close();
            }
        });
        check("tls: a certificate from an unknown CA cannot connect", () -> {
            Client rogue = new Client(addr, tlsConfig(pki, "rogue"));
            try {
                Watcher.Event.KeeperState s = rogue.states.poll(5, TimeUnit.SECONDS);
                expect(s != Watcher.Event.KeeperState.SyncConnected, "connected");
            } finally {
                rogue.close();
            }
        });
        check("tls: cleanup", () -> {
            for (String c : zk.getChildren(BASE, false)) zk.delete(BASE + "/" + c, -1);
            zk.delete(BASE, -1);
        });
        me[0].close();
    }

    static ZKClientConfig saslConfig(String section) throws Exception {
        ZKClientConfig c = new ZKClientConfig();
        if (section == null) {
            c.setProperty("zookeeper.sasl.client", "false");
        } else {
            c.setProperty("zookeeper.sasl.clientconfig", section);
        }
        return c;
    }

    /** A client without SASL connects; reading `path` must fail with `want`. */
    static void anonymousRead(String addr, String path, Class<? extends KeeperException> want)
            throws Exception {
        Client anon = new Client(addr, saslConfig(null));
        try {
            expect(anon.await(Watcher.Event.KeeperState.SyncConnected), "no SyncConnected");
            readRefused(anon.zk, path, want);
        } finally {
            anon.close();
        }
    }

    /** Reading `path` through `zk` must fail with `want`. */
    static void readRefused(ZooKeeper zk, String path, Class<? extends KeeperException> want)
            throws Exception {
        try {
            zk.getData(path, false, null);
            throw new AssertionError("read allowed");
        } catch (KeeperException e) {
            expect(want.isInstance(e), "got " + e);
        }
    }

    static void sasl(String addr) throws Exception {
        final Client[] me = new Client[1];
        check("sasl: DigestLoginModule user authenticates", () -> {
            me[0] = new Client(addr, saslConfig("Client"));
            expect(me[0].await(Watcher.Event.KeeperState.SaslAuthenticated), "no SaslAuthenticated");
        });
        if (me[0] == null) return;
        ZooKeeper zk = me[0].zk;
        check("sasl: whoAmI shows sasl:bob", () -> {
            List<String> ids = whoAmI(zk);
            expect(ids.contains("sasl:bob"), "whoAmI = " + ids);
        });
        List<ACL> bob = Collections.singletonList(new ACL(ZooDefs.Perms.ALL, new Id("sasl", "bob")));
        check("sasl: the sasl ACL admits its user", () -> {
            zk.create(BASE, "s".getBytes(), bob, CreateMode.PERSISTENT);
            expect(new String(zk.getData(BASE, false, null)).equals("s"), "data");
            zk.setData(BASE, "t".getBytes(), -1);
        });
        check("sasl: another user is refused by the sasl ACL", () -> {
            Client alice = new Client(addr, saslConfig("Alice"));
            try {
                expect(alice.await(Watcher.Event.KeeperState.SaslAuthenticated), "alice not authenticated");
                expect(whoAmI(alice.zk).contains("sasl:alice"), "alice whoAmI");
                readRefused(alice.zk, BASE, KeeperException.NoAuthException.class);
            } finally {
                alice.close();
            }
        });
        check("sasl: a client without SASL is refused by the sasl ACL",
            () -> anonymousRead(addr, BASE, KeeperException.NoAuthException.class));
        check("sasl: a wrong password gets AuthFailed", () -> {
            Client wrong = new Client(addr, saslConfig("Wrong"));
            try {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
                boolean authFailed = false;
                while (System.nanoTime() < end && !authFailed) {
                    Watcher.Event.KeeperState s = wrong.states.poll(200, TimeUnit.MILLISECONDS);
                    expect(s != Watcher.Event.KeeperState.SaslAuthenticated, "authenticated");
                    authFailed = s == Watcher.Event.KeeperState.AuthFailed;
                }
                expect(authFailed, "no AuthFailed event");
                readRefused(wrong.zk, BASE, KeeperException.AuthFailedException.class);
            } finally {
                wrong.close();
            }
        });
        check("sasl: cleanup", () -> zk.delete(BASE, -1));
        me[0].close();
    }

    /** Against a server that enforces the sasl scheme (ZooKeeper: enforce.auth.schemes=sasl). */
    static void enforce(String addr) throws Exception {
        check("enforce: a SASL user is served", () -> {
            Client bob = new Client(addr, saslConfig("Client"));
            try {
                expect(bob.await(Watcher.Event.KeeperState.SaslAuthenticated), "no SaslAuthenticated");
                bob.zk.create(BASE, "e".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                expect(new String(bob.zk.getData(BASE, false, null)).equals("e"), "data");
                bob.zk.delete(BASE, -1);
            } finally {
                bob.close();
            }
        });
        check("enforce: a client without SASL gets SessionClosedRequireAuthException",
            () -> anonymousRead(addr, "/", KeeperException.SessionClosedRequireAuthException.class));
        check("enforce: a wrong password is never served", () -> {
            Client wrong = new Client(addr, saslConfig("Wrong"));
            try {
                try {
                    wrong.zk.exists("/", false);
                    throw new AssertionError("request served");
                } catch (KeeperException e) {
                    expect(e.code() == KeeperException.Code.AUTHFAILED, "code " + e.code());
                }
                expect(!wrong.states.contains(Watcher.Event.KeeperState.SaslAuthenticated), "authenticated");
            } finally {
                wrong.close();
            }
        });
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "tls": tls(args[1], args[2], args[3]); break;
            case "sasl": sasl(args[1]); break;
            case "enforce": enforce(args[1]); break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 && passed > 0 ? 0 : 1);
    }
}
