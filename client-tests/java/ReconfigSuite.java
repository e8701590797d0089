import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryForever;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

/**
 * Curator's reconfig API against a three-member ensemble with reconfiguration on and a superuser
 * ({@code super:secret}); compiled with {@link JavaClientSuite} and {@link EnsembleSuite},
 * whose helpers it uses: a client without the superuser gets NOAUTH and a stale
 * {@code fromConfig} BADVERSION; removing member 2 (a follower) returns the new configuration,
 * versioned with the change's zxid, and member 2 goes on serving without a vote under the same
 * leader; adding it back lists it again. (Removing the leader drops every member's clients,
 * so its answer may be lost: the kazoo suite checks that case.)
 *
 * <pre>usage: java ReconfigSuite HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL</pre>
 *
 * Prints {@code PASS name} / {@code FAIL name: reason} per check and {@code N passed, M
 * failed}; exits 1 if anything failed.
 */
public final class ReconfigSuite {
    static void check(boolean cond, String message) {
        JavaClientSuite.check(cond, message);
    }

    /** A client of member {@code id} alone, as the superuser or as anyone. */
    static CuratorFramework client(int id, boolean superuser) throws InterruptedException {
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder()
                .connectString(EnsembleSuite.members[id - 1])
                .sessionTimeoutMs(30_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new RetryForever(100));
        if (superuser) {
            b = b.authorization("digest", "super:secret".getBytes(StandardCharsets.UTF_8));
        }
        CuratorFramework c = b.build();
        c.start();
        check(c.blockUntilConnected(40, TimeUnit.SECONDS), "client connects");
        return c;
    }

    /** The {@code server.N} values of a configuration by id; the version under key -1. */
    static TreeMap<Long, String> parse(byte[] data) {
        TreeMap<Long, String> m = new TreeMap<>();
        for (String line : new String(data, StandardCharsets.UTF_8).split("\n")) {
            int eq = line.indexOf('=');
            if (line.startsWith("server.") && eq > 0) {
                m.put(Long.parseLong(line.substring("server.".length(), eq)), line.substring(eq + 1));
            } else if (line.startsWith("version=")) {
                m.put(-1L, line.substring("version=".length()));
            }
        }
        return m;
    }

    static long version(TreeMap<Long, String> config) {
        return Long.parseLong(config.get(-1L), 16);
    }

    /** Member {@code id}'s {@code srvr} mode, null while it serves nothing. */
    static String mode(int id) {
        String[] hp = EnsembleSuite.members[id - 1].split(":");
        try (Socket s = new Socket(hp[0], Integer.parseInt(hp[1]))) {
            s.setSoTimeout(5000);
            s.getOutputStream().write("srvr".getBytes(StandardCharsets.US_ASCII));
            InputStream in = s.getInputStream();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            in.transferTo(out);
            for (String line : out.toString(StandardCharsets.UTF_8).split("\n")) {
                if (line.startsWith("Mode: ")) {
                    return line.substring("Mode: ".length()).trim();
                }
            }
        } catch (Exception e) {
            return null;
        }
        return null;
    }

    /** The answer and {@code /zookeeper/config} agree: {@code ids} listed, version = mzxid. */
    static TreeMap<Long, String> expectConfig(CuratorFramework c, byte[] data, Stat stat, Long... ids)
            throws Exception {
        TreeMap<Long, String> config = parse(data);
        check(config.headMap(0L).size() == 1, "a version line in " + new String(data, StandardCharsets.UTF_8));
        check(config.tailMap(0L).keySet().equals(new java.util.TreeSet<>(java.util.List.of(ids))),
                "members " + java.util.List.of(ids) + " in " + config);
        check(version(config) == stat.getMzxid(), "version " + config.get(-1L) + " is mzxid 0x"
                + Long.toHexString(stat.getMzxid()));
        check(stat.getVersion() == -1, "the node's version stays -1: " + stat.getVersion());
        c.sync().forPath("/zookeeper/config");
        Stat now = new Stat();
        byte[] current = c.getConfig().storingStatIn(now).forEnsemble();
        check(java.util.Arrays.equals(current, data), "getConfig returns the answer");
        check(now.getMzxid() == stat.getMzxid(), "the same mzxid");
        return config;
    }

    static void refusals() throws Exception {
        CuratorFramework anyone = client(1, false);
        CuratorFramework su = client(1, true);
        try {
            long v = version(parse(su.getConfig().forEnsemble()));
            try {
                anyone.reconfig().leaving("3").fromConfig(v).forEnsemble();
                check(false, "a client without the superuser reconfigured");
            } catch (KeeperException.NoAuthException expected) {
                // only the superuser may write /zookeeper/config
            }
            try {
                su.reconfig().leaving("3").fromConfig(v + 1).forEnsemble();
                check(false, "a stale fromConfig was accepted");
            } catch (KeeperException.BadVersionException expected) {
                // curConfigId must be the current version
            }
        } finally {
            anyone.close();
            su.close();
        }
    }

    static String member2;

    static void removeAndAddBack() throws Exception {
        check("leader".equals(mode(3)), "member 3 leads a fresh ensemble");
        CuratorFramework su = client(1, true);
        try {
            TreeMap<Long, String> before = parse(su.getConfig().forEnsemble());
            member2 = before.get(2L);
            Stat stat = new Stat();
            byte[] data;
            try {
                data = su.reconfig().leaving("2").storingStatIn(stat).fromConfig(version(before))
                        .forEnsemble();
            } catch (KeeperException e) {
                throw new JavaClientSuite.CheckFailed("removing member 2 from " + before + ": " + e);
            }
            expectConfig(su, data, stat, 1L, 3L);
            check("leader".equals(mode(3)), "the leader stays");
            check("follower".equals(mode(2)), "member 2 still serves, as a follower without a vote");
            String joining = "server.2=" + member2.split(";")[0] + ";" + EnsembleSuite.members[1];
            Stat again = new Stat();
            byte[] back;
            try {
                back = su.reconfig().joining(joining).storingStatIn(again).fromConfig(stat.getMzxid())
                        .forEnsemble();
            } catch (KeeperException e) {
                throw new JavaClientSuite.CheckFailed("adding " + joining + " from version 0x"
                        + Long.toHexString(stat.getMzxid()) + ": " + e);
            }
            TreeMap<Long, String> after = expectConfig(su, back, again, 1L, 2L, 3L);
            check(after.get(2L).endsWith(";" + EnsembleSuite.members[1]), "member 2's client address: " + after);
            check("leader".equals(mode(3)), "the leader stays");
        } finally {
            su.close();
        }
    }

    public static void main(String[] args) throws Exception {
        EnsembleSuite.readArgs("ReconfigSuite", args);
        EnsembleSuite.run("curator_reconfig_refused_to_anyone_and_to_a_stale_version", ReconfigSuite::refusals);
        EnsembleSuite.run("curator_reconfig_removes_a_follower_and_adds_it_back", ReconfigSuite::removeAndAddBack);
        EnsembleSuite.finish();
    }
}
