"""The TubeMQ plug-in every lab broker loads: its broker side and a master.

    python -m lab_cluster.broker --id 1 --zk ZK --trial-dir DIR --plugin tubemq_client.service:install

`broker/service.py` serves the partitions this broker leads (registrations,
fetches, confirms); `master/service.py` answers the master's requests
(registration of a client-balance consumer, heartbeats, partition metadata).
"""

from __future__ import annotations

from .broker.service import TubeBrokerService
from .master.service import TubeMasterService


class TubeMQService:
    def __init__(self, broker):
        self.broker_side = TubeBrokerService(broker)
        self.master = TubeMasterService(broker)

    def stop(self) -> None:
        self.broker_side.stop()
        self.master.stop()


def install(broker) -> TubeMQService:
    return TubeMQService(broker)
