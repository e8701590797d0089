package zkd.testing;

import java.util.Objects;

/**
 * One member of a {@link ZkdTestingCluster}, as Curator's {@code InstanceSpec} describes one
 * server of a {@code TestingCluster}: its server id, host and client port. The quorum and
 * election ports are the names the member has in {@code /zookeeper/config}; nothing listens
 * there, as the members of the simulated ensemble talk to no one.
 */
public final class ZkdInstanceSpec {
    private final int serverId;
    private final String hostname;
    private final int port;

    ZkdInstanceSpec(int serverId, String hostname, int port) {
        this.serverId = serverId;
        this.hostname = hostname;
        this.port = port;
    }

    /** The member id (1 to N). */
    public int getServerId() {
        return serverId;
    }

    /** The host the member's client port is bound to. */
    public String getHostname() {
        return hostname;
    }

    /** The member's client port. */
    public int getPort() {
        return port;
    }

    /** The quorum port named for this member in {@code /zookeeper/config} (2888 for member 1). */
    public int getQuorumPort() {
        return 2887 + serverId;
    }

    /** The election port named for this member in {@code /zookeeper/config} (3888 for member 1). */
    public int getElectionPort() {
        return 3887 + serverId;
    }

    /** {@code HOST:PORT} of this member alone. */
    public String getConnectString() {
        return (hostname.contains(":") ? "[" + hostname + "]" : hostname) + ":" + port;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof ZkdInstanceSpec)) {
            return false;
        }
        ZkdInstanceSpec other = (ZkdInstanceSpec) o;
        return serverId == other.serverId && port == other.port && hostname.equals(other.hostname);
    }

    @Override
    public int hashCode() {
        return Objects.hash(serverId, hostname, port);
    }

    @Override
    public String toString() {
        return "ZkdInstanceSpec[serverId=" + serverId + ", " + getConnectString() + "]";
    }
}
