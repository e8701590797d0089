"""zkd for Python tests: :class:`Server` runs the zkd binary (a ZooKeeper-compatible
in-memory server) on free ports and exposes its control plane; the ``zkd`` pytest plugin
gives the ``zkd_server`` and ``zkd_client`` fixtures."""

from ._binary import BinaryNotFound, find_binary
from ._server import AdminError, Server, ServerError, session_hex

__all__ = [
    "AdminError",
    "BinaryNotFound",
    "Server",
    "ServerError",
    "find_binary",
    "session_hex",
]
