package zkd.testing;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A zkd server in a child process, shaped like Curator's {@code TestingServer}:
 * {@code new ZkdTestingServer()} starts one at once on a free port; {@link #getConnectString()}
 * is what clients connect to; {@link #stop()}, {@link #restart()} and {@link #close()} manage
 * it. On top of that it drives zkd's admin control plane: {@link #expireSession(long)},
 * {@link #disconnect(long)}, {@link #reset()}, {@link #pause()}, {@link #advanceClock(Duration)}.
 *
 * <p>Like {@code TestingServer}, state lives in a temporary directory, so {@link #restart()}
 * keeps the tree and the sessions (clients reconnect to the same session); {@link #close()}
 * deletes it. The binary is found by {@link ZkdBinary#find()}.
 */
public class ZkdTestingServer implements Closeable {
    private static final Pattern LISTENING = Pattern.compile("^zkd listening on (\\S+):(\\d+)\\s*$");
    private static final Pattern ADMIN = Pattern.compile("^zkd admin on (\\S+):(\\d+)\\s*$");
    private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (Process p : LIVE) {
                p.destroyForcibly();
            }
        }, "zkd-testing-shutdown"));
    }

    private final Path binary;
    private final boolean manualClock;
    private final Integer tickTime;
    private final String zookeeperVersion;
    private final List<String> extraArgs;
    private final Duration startupTimeout;
    private final Path tempDirectory;
    private final boolean deleteTempDirectory;
    private int requestedPort;

    private Process process;
    private String host;
    private int port = -1;
    private String adminHost;
    private int adminPort = -1;
    private final Deque<String> output = new ArrayDeque<>();
    private final List<String> listening = new CopyOnWriteArrayList<>();
    private int listenersExpected = 1;

    /** Starts a server on a free port at once. */
    public ZkdTestingServer() throws Exception {
        this(0, true);
    }

    /** Creates a server on a free port; starts it if {@code start}. */
    public ZkdTestingServer(boolean start) throws Exception {
        this(0, start);
    }

    /** Starts a server on {@code port} (0 = a free one) at once. */
    public ZkdTestingServer(int port) throws Exception {
        this(port, true);
    }

    /** Creates a server on {@code port} (0 = a free one); starts it if {@code start}. */
    public ZkdTestingServer(int port, boolean start) throws Exception {
        this(builder().port(port), start);
    }

    private ZkdTestingServer(Builder b, boolean start) throws Exception {
        this.binary = b.binary != null ? b.binary : ZkdBinary.find();
        this.manualClock = b.manualClock;
        this.tickTime = b.tickTime;
        this.zookeeperVersion = b.zookeeperVersion;
        this.extraArgs = new ArrayList<>(b.extraArgs);
        this.startupTimeout = b.startupTimeout;
        this.requestedPort = b.port;
        if (b.tempDirectory != null) {
            this.tempDirectory = b.tempDirectory;
            this.deleteTempDirectory = false;
        } else {
            this.tempDirectory = Files.createTempDirectory("zkd-testing");
            this.deleteTempDirectory = true;
        }
        if (start) {
            start();
        }
    }

    /** Options beyond the port: a manual clock, tick time, extra flags, the binary. */
    public static Builder builder() {
        return new Builder();
    }

    /** Builder of a {@link ZkdTestingServer}. */
    public static final class Builder {
        private int port;
        private boolean manualClock;
        private Integer tickTime;
        private String zookeeperVersion;
        private final List<String> extraArgs = new ArrayList<>();
        private Path binary;
        private Path tempDirectory;
        private Duration startupTimeout = Duration.ofSeconds(30);

        private Builder() {}

        /** Client port; 0 (the default) picks a free one. */
        public Builder port(int port) {
            this.port = port;
            return this;
        }

        /** Session expiry and TTLs move only with {@link ZkdTestingServer#advanceClock}. */
        public Builder manualClock() {
            this.manualClock = true;
            return this;
        }

        /** zkd's {@code --tick-time} in milliseconds. */
        public Builder tickTime(int ms) {
            this.tickTime = ms;
            return this;
        }

        /**
         * The ZooKeeper release line zkd behaves as, {@code "3.8"} or {@code "3.9"} (zkd's
         * {@code --zookeeper-version}; its default is 3.9).
         */
        public Builder zookeeperVersion(String version) {
            if (!"3.8".equals(version) && !"3.9".equals(version)) {
                throw new IllegalArgumentException(
                        "zookeeperVersion is 3.8 or 3.9, not " + version);
            }
            this.zookeeperVersion = version;
            return this;
        }

        /** Extra command-line flags for zkd. */
        public Builder args(String... args) {
            Collections.addAll(extraArgs, args);
            return this;
        }

        /** The zkd binary (default: {@link ZkdBinary#find()}). */
        public Builder binary(Path binary) {
            this.binary = binary;
            return this;
        }

        /** Data directory to use (kept on close); default: a fresh temporary one. */
        public Builder tempDirectory(Path dir) {
            this.tempDirectory = dir;
            return this;
        }

        /** How long to wait for the server to listen (default 30 s). */
        public Builder startupTimeout(Duration timeout) {
            this.startupTimeout = timeout;
            return this;
        }

        /** Creates the server and starts it. */
        public ZkdTestingServer build() throws Exception {
            return new ZkdTestingServer(this, true);
        }

        /** Creates the server; starts it if {@code start}. */
        public ZkdTestingServer build(boolean start) throws Exception {
            return new ZkdTestingServer(this, start);
        }
    }

    // ---- life cycle -------------------------------------------------------------------

    /** Starts the server and waits until it listens. Does nothing if it is running. */
    public synchronized void start() throws Exception {
        if (process != null && process.isAlive()) {
            return;
        }
        List<String> cmd = new ArrayList<>();
        cmd.add(binary.toString());
        Collections.addAll(cmd, "--port", Integer.toString(requestedPort), "--admin-port", "0",
                "--data-dir", tempDirectory.toString(), "--fsync", "never", "--log", "warn");
        if (manualClock) {
            Collections.addAll(cmd, "--clock", "manual");
        }
        if (tickTime != null) {
            Collections.addAll(cmd, "--tick-time", tickTime.toString());
        }
        if (zookeeperVersion != null) {
            Collections.addAll(cmd, "--zookeeper-version", zookeeperVersion);
        }
        cmd.addAll(extraArgs);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectInput(ProcessBuilder.Redirect.from(new File(nullDevice())));
        synchronized (output) {
            output.clear();
        }
        host = null;
        port = -1;
        listening.clear();
        adminHost = null;
        adminPort = -1;
        Process p = pb.start();
        process = p;
        LIVE.add(p);
        CountDownLatch ready = new CountDownLatch(1);
        Thread reader = new Thread(() -> readOutput(p, ready), "zkd-output-" + p.pid());
        reader.setDaemon(true);
        reader.start();
        long deadline = System.nanoTime() + startupTimeout.toNanos();
        while (!ready.await(50, TimeUnit.MILLISECONDS)) {
            if (!p.isAlive()) {
                reader.join(2000);
                int code = p.exitValue();
                LIVE.remove(p);
                process = null;
                throw new IllegalStateException("zkd exited with code " + code + " before listening:\n" + output());
            }
            if (System.nanoTime() > deadline) {
                stop();
                throw new IllegalStateException("zkd did not report listening within "
                        + startupTimeout.getSeconds() + "s:\n" + output());
            }
        }
        // restart() reuses the port, as TestingServer does (an ensemble's members get free ports again).
        if (listenersExpected == 1) {
            requestedPort = port;
        }
    }

    private void readOutput(Process p, CountDownLatch ready) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                synchronized (output) {
                    output.addLast(line);
                    if (output.size() > 200) {
                        output.removeFirst();
                    }
                }
                Matcher m = LISTENING.matcher(line);
                if (m.matches()) {
                    listening.add(m.group(1) + ":" + m.group(2));
                    if (port <= 0) {
                        // an ensemble prints one line per member; the first is member 1
                        host = m.group(1);
                        port = Integer.parseInt(m.group(2));
                    }
                }
                m = ADMIN.matcher(line);
                if (m.matches()) {
                    adminHost = m.group(1);
                    adminPort = Integer.parseInt(m.group(2));
                }
                if (listening.size() >= listenersExpected && adminPort > 0) {
                    ready.countDown();
                }
            }
        } catch (IOException e) {
            // the process is gone; nothing more to read
        }
    }

    /** Waits for {@code n} {@code zkd listening on} lines at start (one per ensemble member). */
    void expectListeners(int n) {
        this.listenersExpected = n;
    }

    /** {@code HOST:PORT} of every {@code zkd listening on} line of the running process, in order. */
    List<String> listeningAddresses() {
        return List.copyOf(listening);
    }

    /** The last lines zkd printed (warnings and errors). */
    public String output() {
        synchronized (output) {
            return String.join("\n", output);
        }
    }

    /** Stops the server (SIGTERM, then a kill after 10 s) and reaps it; {@link #restart()} starts it again. */
    public synchronized void stop() throws IOException {
        Process p = process;
        if (p == null) {
            return;
        }
        p.destroy();
        try {
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor();
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        } finally {
            LIVE.remove(p);
            process = null;
        }
    }

    /** Stops and starts the server on the same port; the tree and the sessions are kept. */
    public synchronized void restart() throws Exception {
        stop();
        start();
    }

    /** Stops the server and deletes its temporary directory. */
    @Override
    public synchronized void close() throws IOException {
        stop();
        if (deleteTempDirectory && Files.exists(tempDirectory)) {
            try (Stream<Path> walk = Files.walk(tempDirectory)) {
                walk.sorted(Comparator.reverseOrder()).forEach(f -> {
                    try {
                        Files.delete(f);
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
            }
        }
    }

    /** Whether the process is running. */
    public synchronized boolean isRunning() {
        return process != null && process.isAlive();
    }

    /** The client port. */
    public int getPort() {
        return port > 0 ? port : requestedPort;
    }

    /** {@code HOST:PORT} for any ZooKeeper client. */
    public String getConnectString() {
        return (host != null ? host : "127.0.0.1") + ":" + getPort();
    }

    /** The data directory (as TestingServer's temp directory). */
    public File getTempDirectory() {
        return tempDirectory.toFile();
    }

    /** The admin HTTP port. */
    public int getAdminPort() {
        return adminPort;
    }

    /** The process id of the running zkd, or -1. */
    public synchronized long getPid() {
        return process != null ? process.pid() : -1;
    }

    // ---- control plane ----------------------------------------------------------------

    private static String hex(long sessionId) {
        return "0x" + Long.toHexString(sessionId);
    }

    /** Expires a session (from {@code ZooKeeper.getSessionId()}), as its timeout would: its
     * ephemerals are deleted and its client sees the expiry. */
    public void expireSession(long sessionId) {
        admin("POST", "/zkd/sessions/" + hex(sessionId) + "/expire", null);
    }

    /** Closes the session's connection; the session lives on and its client reconnects. */
    public void disconnect(long sessionId) {
        admin("POST", "/zkd/sessions/" + hex(sessionId) + "/disconnect", null);
    }

    /** Deletes every node but {@code /} and {@code /zookeeper}; sessions are kept. */
    public void reset() {
        admin("POST", "/zkd/reset", null);
    }

    /** {@link #reset()}; with {@code expireSessions} every session is expired first. */
    public void reset(boolean expireSessions) {
        admin("POST", expireSessions ? "/zkd/reset?sessions=expire" : "/zkd/reset", null);
    }

    /** Moves the manual clock ({@link Builder#manualClock()}) forward; sessions whose timeout
     * passes expire. */
    public void advanceClock(Duration by) {
        if (by.isNegative()) {
            throw new IllegalArgumentException("cannot move the clock back: " + by);
        }
        admin("POST", "/zkd/clock/advance?ms=" + by.toMillis(), null);
    }

    /** Stops answering requests (connections stay open) until {@link #resume()}. */
    public void pause() {
        admin("POST", "/zkd/pause", null);
    }

    /** Stops answering requests for {@code duration}, then goes on by itself. */
    public void pause(Duration duration) {
        admin("POST", "/zkd/pause?ms=" + duration.toMillis(), null);
    }

    /** Ends a pause. */
    public void resume() {
        admin("POST", "/zkd/resume", null);
    }

    /** The open sessions, as the admin API's JSON. */
    public String sessionsJson() {
        return admin("GET", "/zkd/sessions", null);
    }

    /** Adds a fault rule given as the admin API's JSON (e.g.
     * {@code {"action":"error","code":"NONODE","opcode":"getData","path":"/f","count":1}}); returns the
     * rule as JSON, with its id. */
    public String addFault(String ruleJson) {
        return admin("POST", "/zkd/faults", ruleJson);
    }

    /** Removes every fault rule. */
    public void clearFaults() {
        admin("DELETE", "/zkd/faults", null);
    }

    /** Adds a network fault on client connections given as the admin API's JSON: a
     * {@code blackhole} (nothing read or written, nothing closed: the client notices by its own
     * timeout), {@code drop-replies} (requests applied, replies lost) or {@code latency} with
     * {@code ms} added each way, on the connection a {@code session} has now, connections
     * from a {@code client} address, to an ensemble {@code member}, or every connection (e.g.
     * {@code {"action":"blackhole","session":"0x1000abcd0000"}}); returns it as JSON, with its
     * id and the number of open connections it holds. */
    public String addNetFault(String faultJson) {
        return admin("POST", "/zkd/net-faults", faultJson);
    }

    /** The network faults in force, as the admin API's JSON. */
    public String netFaultsJson() {
        return admin("GET", "/zkd/net-faults", null);
    }

    /** Removes one network fault: a latency ends, and the connections a blackhole or dropped
     * replies held are closed (their clients reconnect). */
    public void removeNetFault(long id) {
        admin("DELETE", "/zkd/net-faults/" + id, null);
    }

    /** Removes every network fault. */
    public void clearNetFaults() {
        admin("DELETE", "/zkd/net-faults", null);
    }

    // ---- history ----------------------------------------------------------------------

    private static final Pattern LAST_SEQ = Pattern.compile("\"last_seq\"\\s*:\\s*(\\d+)");
    private static final Pattern SEQ = Pattern.compile("\"seq\"\\s*:\\s*(\\d+)");
    private static final int HISTORY_PAGE = 10_000;

    /** Where a test's window of the history starts: the {@code seq} of the last event recorded
     * so far (0 when none is, or the history is off). */
    public long historyMark() {
        Matcher m = LAST_SEQ.matcher(admin("GET", "/zkd/history?format=json", null));
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }

    /** The history's events after {@code afterSeq} as JSON Lines, oldest first, every page
     * (see docs/history.md for the events and their fields). */
    public String historyJsonl(long afterSeq) {
        StringBuilder all = new StringBuilder();
        long after = afterSeq;
        for (;;) {
            String page = admin("GET", "/zkd/history?limit=" + HISTORY_PAGE + "&after_seq=" + after, null);
            int lines = 0;
            String last = null;
            for (String line : page.split("\n")) {
                if (!line.isBlank()) {
                    all.append(line).append('\n');
                    lines++;
                    last = line;
                }
            }
            Matcher m = last == null ? null : SEQ.matcher(last);
            if (lines < HISTORY_PAGE || m == null || !m.find()) {
                return all.toString();
            }
            after = Long.parseLong(m.group(1));
        }
    }

    /** What the recipe checks find in the events after {@code afterSeq}, as JSON: a list of
     * {@code {"check", "summary", "seqs"}}. */
    public String historyChecksJson(long afterSeq) {
        return admin("GET", "/zkd/history/checks?after_seq=" + afterSeq, null);
    }

    /** A self-contained HTML page drawing the events after {@code afterSeq} on a timeline. */
    public String historyTimelineHtml(long afterSeq) {
        return admin("GET", "/zkd/history/timeline?after_seq=" + afterSeq, null);
    }

    /** Writes the events after {@code afterSeq} to {@code dir/name.history.jsonl} and their
     * timeline to {@code dir/name.history.html}; returns the two files. */
    public List<Path> saveHistory(Path dir, String name, long afterSeq) throws IOException {
        Files.createDirectories(dir);
        Path jsonl = dir.resolve(name + ".history.jsonl");
        Path html = dir.resolve(name + ".history.html");
        Files.writeString(jsonl, historyJsonl(afterSeq));
        Files.writeString(html, historyTimelineHtml(afterSeq));
        return List.of(jsonl, html);
    }

    /**
     * Calls the admin HTTP API and returns the response body.
     *
     * @throws ZkdAdminException when the server answers with an error status
     */
    public String admin(String method, String pathAndQuery, String jsonBody) {
        if (adminPort <= 0 || !isRunning()) {
            throw new IllegalStateException("the zkd server is not running");
        }
        String h = adminHost.contains(":") ? "[" + adminHost + "]" : adminHost;
        try {
            URL url = new URL("http://" + h + ":" + adminPort + pathAndQuery);
            HttpURLConnection c = (HttpURLConnection) url.openConnection();
            c.setRequestMethod(method);
            c.setConnectTimeout(10_000);
            c.setReadTimeout(30_000);
            if (jsonBody != null || "POST".equals(method)) {
                byte[] body = jsonBody == null ? new byte[0] : jsonBody.getBytes(StandardCharsets.UTF_8);
                c.setDoOutput(true);
                c.setRequestProperty("Content-Type", "application/json");
                c.setFixedLengthStreamingMode(body.length);
                try (OutputStream out = c.getOutputStream()) {
                    out.write(body);
                }
            }
            int status = c.getResponseCode();
            InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
            String text = in == null ? "" : readAll(in);
            c.disconnect();
            if (status >= 400) {
                throw new ZkdAdminException(status, method + " " + pathAndQuery + ": " + status + " " + errorOf(text));
            }
            return text;
        } catch (IOException e) {
            throw new UncheckedIOException("admin call " + method + " " + pathAndQuery + " failed", e);
        }
    }

    private static String readAll(InputStream in) throws IOException {
        try (InputStream i = in) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            i.transferTo(buf);
            return buf.toString(StandardCharsets.UTF_8);
        }
    }

    /** The sentence of a {@code {"error": "..."}} body, or the body itself. */
    private static String errorOf(String body) {
        Matcher m = Pattern.compile("\"error\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(body);
        return m.find() ? m.group(1).replace("\\\"", "\"").replace("\\\\", "\\") : body;
    }

    private static String nullDevice() {
        return System.getProperty("os.name", "").startsWith("Windows") ? "NUL" : "/dev/null";
    }

    @Override
    public String toString() {
        return "ZkdTestingServer[" + getConnectString() + (isRunning() ? "" : ", stopped") + "]";
    }
}
