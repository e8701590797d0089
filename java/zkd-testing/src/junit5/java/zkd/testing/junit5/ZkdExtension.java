package zkd.testing.junit5;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;

import zkd.testing.ZkdAdminException;
import zkd.testing.ZkdTestingServer;

/**
 * JUnit 5 extension: {@code @ExtendWith(ZkdExtension.class)} and a {@link ZkdTestingServer}
 * parameter on a test (or a lifecycle method) give it one zkd server shared by the whole test
 * run, started on first use and stopped when the run ends. After each test that used it,
 * fault rules are removed, a pause is ended, every session is expired and every node but
 * {@code /} and {@code /zookeeper} is deleted, so tests do not see each other's data.
 *
 * <p>When a test that used it fails, what the server recorded while the test ran (its history,
 * see docs/history.md) is written as {@code <class>.<method>.history.jsonl} and as a
 * self-contained timeline {@code <class>.<method>.history.html} under the build directory
 * ({@code build/zkd-history} where a Gradle build file is in the working directory, else
 * {@code target/zkd-history}; the system property {@code zkd.history.dir} picks another), and
 * the paths and what the recipe checks found are printed to standard error.
 */
public class ZkdExtension implements ParameterResolver, BeforeEachCallback, AfterEachCallback {
    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(ZkdExtension.class);
    private static final String USED = "used";
    private static final String MARK = "history-mark";

    /** Holds the run's server; JUnit closes it when the run ends. */
    private static final class Shared implements ExtensionContext.Store.CloseableResource {
        final ZkdTestingServer server;

        Shared() {
            try {
                server = new ZkdTestingServer();
            } catch (Exception e) {
                throw new ParameterResolutionException("cannot start zkd: " + e.getMessage(), e);
            }
        }

        @Override
        public void close() throws Throwable {
            server.close();
        }
    }

    private static ZkdTestingServer shared(ExtensionContext context) {
        return context.getRoot().getStore(NAMESPACE).getOrComputeIfAbsent(Shared.class, k -> new Shared(), Shared.class).server;
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == ZkdTestingServer.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        context.getStore(NAMESPACE).put(USED, Boolean.TRUE);
        return shared(context);
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        // The run's server may not be started yet (its first test): its whole history is then
        // the test's.
        Shared started = context.getRoot().getStore(NAMESPACE).get(Shared.class, Shared.class);
        long mark = 0;
        if (started != null && started.server.isRunning()) {
            try {
                mark = started.server.historyMark();
            } catch (RuntimeException e) {
                mark = -1; // no history to attach
            }
        }
        context.getStore(NAMESPACE).put(MARK, mark);
    }

    /** Where failed tests' histories go. */
    static Path historyDir() {
        String chosen = System.getProperty("zkd.history.dir");
        if (chosen != null && !chosen.isEmpty()) {
            return Paths.get(chosen);
        }
        boolean gradle = Files.exists(Paths.get("build.gradle")) || Files.exists(Paths.get("build.gradle.kts"));
        return Paths.get(gradle ? "build" : "target", "zkd-history").toAbsolutePath();
    }

    private static void attachHistory(ExtensionContext context, ZkdTestingServer server) {
        Long mark = context.getStore(NAMESPACE).get(MARK, Long.class);
        if (mark == null || mark < 0 || context.getExecutionException().isEmpty()) {
            return;
        }
        String name = (context.getRequiredTestClass().getName() + "." + context.getRequiredTestMethod().getName())
                .replaceAll("[^A-Za-z0-9_.-]+", "_");
        try {
            List<Path> files = server.saveHistory(historyDir(), name, mark);
            System.err.println("zkd history of " + context.getDisplayName() + " (JSON Lines): " + files.get(0));
            System.err.println("zkd timeline: " + files.get(1));
            System.err.println("zkd recipe checks found: " + server.historyChecksJson(mark));
        } catch (IOException | RuntimeException e) {
            System.err.println("zkd history of " + context.getDisplayName() + " could not be saved: " + e);
        }
    }

    @Override
    public void afterEach(ExtensionContext context) {
        boolean used = context.getStore(NAMESPACE).get(USED) != null
                || context.getParent().map(p -> p.getStore(NAMESPACE).get(USED) != null).orElse(false);
        if (!used) {
            return;
        }
        ZkdTestingServer server = shared(context);
        if (!server.isRunning()) {
            return;
        }
        attachHistory(context, server);
        server.clearFaults();
        server.clearNetFaults();
        try {
            server.resume();
        } catch (ZkdAdminException e) {
            if (e.status() != 409) { // 409: it was not paused
                throw e;
            }
        }
        server.reset(true);
    }
}
