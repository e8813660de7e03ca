"""Real ZooKeeper servers on demand: embedded JVMs, containers, or an external ensemble.

Start here: `provision()` in `backends.py`; what an ensemble offers is in
`ensemble.py`; one server's controls in `server.py`; the config every backend
shares in `settings.py`.
"""

from .backends import BACKENDS, BackendChoice, BackendRequest, choose_backend, provision
from .ensemble import Ensemble
from .server import ServerState, ZkServer
from .settings import ZkSettings

__all__ = ["BACKENDS", "BackendChoice", "BackendRequest", "Ensemble", "ServerState", "ZkServer", "ZkSettings",
           "choose_backend", "provision"]
