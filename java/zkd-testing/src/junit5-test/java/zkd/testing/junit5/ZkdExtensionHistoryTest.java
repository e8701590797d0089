package zkd.testing.junit5;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;

import zkd.testing.ZkdTestingServer;

/** A failing test leaves its history: a Curator lock taken twice after a forced expiry. */
class ZkdExtensionHistoryTest {
    /** Run only by {@link #aFailedTestLeavesItsHistoryUnderTheBuildDirectory()}: it fails. */
    @ExtendWith(ZkdExtension.class)
    static class LockTakenTwice {
        static volatile long expired;

        private static CuratorFramework client(ZkdTestingServer server) throws Exception {
            CuratorFramework c = CuratorFrameworkFactory.newClient(server.getConnectString(), 10_000, 10_000,
                    new RetryOneTime(100));
            c.start();
            assertTrue(c.blockUntilConnected(30, TimeUnit.SECONDS));
            return c;
        }

        @Test
        void onlyOneWorkerHoldsTheLock(ZkdTestingServer server) throws Exception {
            assumeTrue(Boolean.getBoolean("zkd.history.inner"), "run by ZkdExtensionHistoryTest");
            try (CuratorFramework a = client(server); CuratorFramework b = client(server)) {
                InterProcessMutex mine = new InterProcessMutex(a, "/locks/job");
                InterProcessMutex theirs = new InterProcessMutex(b, "/locks/job");
                assertTrue(mine.acquire(10, TimeUnit.SECONDS));
                expired = a.getZookeeperClient().getZooKeeper().getSessionId();
                server.expireSession(expired);
                assertTrue(theirs.acquire(20, TimeUnit.SECONDS));
                // The first worker never looked at its connection state: it still believes it
                // holds the lock.
                assertFalse(mine.isAcquiredInThisProcess() && theirs.isAcquiredInThisProcess(),
                        "the lock is held twice");
            }
        }
    }

    @Test
    void aFailedTestLeavesItsHistoryUnderTheBuildDirectory() throws Exception {
        Path dir = Files.createTempDirectory("zkd-history");
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream realErr = System.err;
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        System.setProperty("zkd.history.inner", "true");
        System.setProperty("zkd.history.dir", dir.toString());
        try {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                    .selectors(selectClass(LockTakenTwice.class)).build();
            Launcher launcher = LauncherFactory.create();
            launcher.execute(request, summary);
        } finally {
            System.setErr(realErr);
            System.clearProperty("zkd.history.inner");
            System.clearProperty("zkd.history.dir");
        }
        String printed = err.toString(StandardCharsets.UTF_8);
        realErr.print(printed);
        assertEquals(1, summary.getSummary().getTotalFailureCount(), printed);
        String name = LockTakenTwice.class.getName().replace('$', '_') + ".onlyOneWorkerHoldsTheLock";
        Path jsonl = dir.resolve(name + ".history.jsonl");
        Path html = dir.resolve(name + ".history.html");
        assertTrue(printed.contains("(JSON Lines): " + jsonl), printed);
        assertTrue(printed.contains("zkd timeline: " + html), printed);
        List<String> events = Files.readAllLines(jsonl);
        String session = "\"session\":\"0x" + Long.toHexString(LockTakenTwice.expired) + "\"";
        List<String> mine = events.stream().filter(l -> l.contains(session)).collect(Collectors.toList());
        int expiry = indexOf(mine, "\"kind\":\"session_expired\"");
        assertTrue(expiry >= 0 && mine.get(expiry).contains("\"why\":\"control\""), String.join("\n", mine));
        assertTrue(mine.get(expiry).contains("/locks/job/"), "its lock node went with it: " + mine.get(expiry));
        // the control plane's action that caused it, and the expired worker coming back to it
        assertTrue(events.stream().anyMatch(l -> l.contains("\"kind\":\"control\"") && l.contains("\"action\":\"expire\"")),
                String.join("\n", events));
        String asked = "\"session_asked\":\"0x" + Long.toHexString(LockTakenTwice.expired) + "\"";
        long expirySeq = seq(mine.get(expiry));
        assertTrue(events.stream().anyMatch(l -> l.contains(asked) && seq(l) > expirySeq),
                "the worker's return to its expired session: " + String.join("\n", events));
        String page = Files.readString(html);
        assertTrue(page.startsWith("<!doctype html>") && page.contains("id=\"zkd-history\""), page);
    }

    private static int indexOf(List<String> lines, String needle) {
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).contains(needle)) {
                return i;
            }
        }
        return -1;
    }

    private static long seq(String line) {
        Matcher m = Pattern.compile("\"seq\"\\s*:\\s*(\\d+)").matcher(line);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }
}
