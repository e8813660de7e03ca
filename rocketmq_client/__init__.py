"""RocketMQ 4.x's client-side rebalance (CLUSTERING mode), the next family of the lab: DESIGN.md §3b.

As in Kafka 0.8, every consumer computes its own queues, but membership comes
from brokers rather than ZooKeeper: each client heartbeats every broker, each
broker keeps its own consumer table and pushes NOTIFY_CONSUMER_IDS_CHANGED to
the group's clients, and a client allocates from the id list of one broker,
picked at random. Nothing makes the brokers agree, and nothing fences an
offset commit.

Built so far (issue 16), without I/O, after RocketMQ 4.9.8:

- `rebalance.py`: one consumer's rebalance of a topic (`RebalanceImpl`:
  allocate from one broker's id list, update the process-queue table, start
  offsets, orderly locks);

and the broker side:

- `broker/consumer_manager.py`: the consumer table, its four roads of
  change, and when the broker notifies;
- `broker/offsets.py`: offsets per ``topic@group`` and queue, accepted from anyone;
- `broker/locks.py`: the orderly consumers' queue locks (60 s).
- `broker/service.py`: the plug-in that puts them on a lab broker's wire
  (HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, the offset and
  lock requests), pushes NOTIFY_CONSUMER_IDS_CHANGED and runs the 10 s scan.

The allocation strategies are shared: `lab_cluster/assignment/rocketmq.py`.
The wire has what RocketMQ's remoting needs (`lab_cluster/wire.py`): a
server-side `Channel` per connection, told to listeners when it closes, with
`push` for NOTIFY_CONSUMER_IDS_CHANGED, and a `DuplexClient` that reads its
connection all the time.
The client with its service loops and the family's `FAMILY` descriptor come next;
until then the family is not in the registry (`experiments/engine/families.py`).
"""
