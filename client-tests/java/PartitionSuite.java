import java.net.HttpURLConnection;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;

/**
 * Curator's LeaderLatch across a partition of a three-member ensemble (compiled with
 * {@link EnsembleSuite} and {@link JavaClientSuite}, whose helpers it uses): three latches,
 * one client each; the member the leader's client is on is cut off from the other two, and
 * later the ensemble heals. Sampled every few milliseconds from the cut to well after the
 * heal, at most one latch has leadership at any time, and a latch leads again after the cut
 * (its client on the majority's side) and after the heal.
 *
 * <pre>usage: java PartitionSuite HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL</pre>
 *
 * CONTROL_URL answers {@code POST /zkd/partition?groups=ID} and {@code POST /zkd/heal}: zkd's
 * admin listener, or the test kit's endpoint over ZooKeeper servers in network namespaces.
 * Prints {@code PASS name} / {@code FAIL name: reason} per check and {@code N passed, M
 * failed}; exits 1 if anything failed.
 */
public final class PartitionSuite {
    static void post(String path) throws Exception {
        HttpURLConnection c = (HttpURLConnection) new URL(EnsembleSuite.control + path).openConnection();
        c.setRequestMethod("POST");
        c.setConnectTimeout(5000);
        c.setReadTimeout(10000);
        int status = c.getResponseCode();
        EnsembleSuite.check(status == 200, "POST " + path + " answered HTTP " + status);
        c.disconnect();
    }

    /** The latch that leads, or -1. */
    static int leader(List<LeaderLatch> latches) {
        for (int i = 0; i < latches.size(); i++) {
            if (latches.get(i).hasLeadership()) {
                return i;
            }
        }
        return -1;
    }

    /** Samples the leaders for {@code ms}, or until {@code until} holds; the most seen at once. */
    static int sample(List<LeaderLatch> latches, long ms, java.util.function.BooleanSupplier until)
            throws InterruptedException {
        int most = 0;
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (System.nanoTime() < end) {
            most = Math.max(most, EnsembleSuite.leaders(latches));
            if (until.getAsBoolean()) {
                break;
            }
            Thread.sleep(3);
        }
        return most;
    }

    static void leaderLatchKeepsAtMostOneLeaderAcrossASplit() throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        List<LeaderLatch> latches = new ArrayList<>();
        String path = "/partition-latch-" + System.nanoTime();
        try {
            EnsembleSuite.startLatches(clients, latches, path);
            EnsembleSuite.waitFor("one leader", () -> EnsembleSuite.leaders(latches) == 1);
            int first = leader(latches);
            int cut = EnsembleSuite.memberOf(clients.get(first));
            post("/zkd/partition?groups=" + cut);
            int most = sample(latches, 60_000, () -> {
                int l = leader(latches);
                try {
                    return l >= 0 && EnsembleSuite.memberOf(clients.get(l)) != cut;
                } catch (Throwable t) {
                    return false;
                }
            });
            int after = leader(latches);
            EnsembleSuite.check(after >= 0 && EnsembleSuite.memberOf(clients.get(after)) != cut,
                    "a leader on the majority's side within 60 s of cutting member " + cut);
            post("/zkd/heal");
            most = Math.max(most, sample(latches, 3_000, () -> false));
            EnsembleSuite.waitFor("one leader after the heal", () -> EnsembleSuite.leaders(latches) == 1);
            most = Math.max(most, sample(latches, 1_000, () -> false));
            EnsembleSuite.check(most == 1, "at most one leader at any time, saw " + most);
        } finally {
            try {
                post("/zkd/heal");
            } catch (Throwable t) {
                // already healed
            }
            for (LeaderLatch l : latches) {
                l.close();
            }
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        EnsembleSuite.readArgs("PartitionSuite", args);
        EnsembleSuite.run("curator_leader_latch_keeps_at_most_one_leader_across_a_split",
                PartitionSuite::leaderLatchKeepsAtMostOneLeaderAcrossASplit);
        EnsembleSuite.finish();
    }
}
