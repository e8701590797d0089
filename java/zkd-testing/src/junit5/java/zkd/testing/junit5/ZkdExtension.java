package zkd.testing.junit5;

import org.junit.jupiter.api.extension.AfterEachCallback;
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
 */
public class ZkdExtension implements ParameterResolver, AfterEachCallback {
    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(ZkdExtension.class);
    private static final String USED = "used";

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
