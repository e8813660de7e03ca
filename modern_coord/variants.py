"""The coordinator era's later designs as families of their own: the same client, other defaults (`docs/design.md`).

Kafka did not replace its classic protocol to get static membership (KIP-345,
Kafka 2.3) or cooperative rebalancing (KIP-429, Kafka 2.4): both are settings
of the same consumer talking to the same coordinator. So each variant here is
`modern_coord.FAMILY` with its own name, label and colour, and a `configure`
that puts the variant's settings *before* the given properties (a trial's
overrides still win, as a user's own config would):

- `classic-static` adds `group.instance.id` = the actor's name (`c3`): a member
  restarted within `session.timeout.ms` comes back under the same id, with no
  rebalance, and nobody else revokes anything (`coordinator/`: the static
  member's id is replaced, the generation kept);
- `classic-coop` adds `partition.assignment.strategy=cooperative-sticky`: members
  keep what they own through a rebalance and give up only what moves, handed
  out in one more round (`consumer.py`);
- `classic-static-coop` adds both;
- `consumer-848` adds `group.protocol=consumer` (KIP-848, Kafka 4.0): the
  family then builds a `Kip848Consumer` (`modern_coord.build_consumer`), which
  sends only ConsumerGroupHeartbeat; the coordinator computes every member's
  assignment and each member reconciles alone. Its session and heartbeat
  interval are the coordinator's (Kafka's defaults, `KIP848_BROKER_CONFIG`;
  an experiment sets them as broker settings, `TrialSpec.broker_overrides`).

A static member sends no LeaveGroup when it stops (Kafka's `close()` for a
static member), so a restart changes nothing the others hear of: they report
no new state line, and the trial runner waits for the group's fixpoint instead
of a line from every member (`every_member_rebalances=False`,
`experiments/engine/group_watch.py`): every partition held once, loads even,
one generation. The consumer host loads a variant by `module:ATTRIBUTE`
(`Family.package`, `lab_cluster.consumer_host.load_family`).

    >>> props = {"group.id": "g", "bootstrap.servers": "h:1"}
    >>> STATIC.configure(props, "c3").group_instance_id
    'c3'
    >>> STATIC.configure({**props, "group.instance.id": "web-1"}, "c3").group_instance_id  # the user's wins
    'web-1'
"""

from __future__ import annotations

from dataclasses import replace

from . import FAMILY

#: the settings each variant adds (`{actor}`: the member's actor name, so each member has its own instance id)
STATIC_PROPS = {"group.instance.id": "{actor}"}
COOP_PROPS = {"partition.assignment.strategy": "cooperative-sticky"}
KIP848_PROPS = {"group.protocol": "consumer"}
#: the coordinator's KIP-848 settings for this design's trials: none, so Kafka's defaults hold, a heartbeat every
#: 5 s (`group.consumer.heartbeat.interval.ms`) and a 45 s session (`group.consumer.session.timeout.ms`), as the
#: classic designs run with the Java client's defaults. An experiment that shortens the classic consumer's
#: session (the zombie's) gives this design the same values as broker settings (`TrialSpec.broker_overrides`).
KIP848_BROKER_CONFIG: dict[str, str] = {}


def _with_defaults(defaults: dict[str, str]):
    """A `configure` that gives the variant's `defaults` (with `{actor}` filled in) unless the props set them."""
    def configure(props: dict[str, str], actor: str):
        return FAMILY.configure({**{k: v.format(actor=actor) for k, v in defaults.items()}, **props}, actor)
    return configure


STATIC = replace(FAMILY, name="classic-static", label="classic-static (KIP-345)",
                 colour="tab:cyan", marker="v",
                 package="modern_coord.variants:STATIC", configure=_with_defaults(STATIC_PROPS),
                 every_member_rebalances=False)
COOP = replace(FAMILY, name="classic-coop", label="classic-coop (KIP-429)", colour="tab:orange",
               marker="^", package="modern_coord.variants:COOP", configure=_with_defaults(COOP_PROPS))
STATIC_COOP = replace(FAMILY, name="classic-static-coop", label="classic-static-coop (KIP-345 + 429)",
                      colour="tab:olive", marker="<", package="modern_coord.variants:STATIC_COOP",
                      configure=_with_defaults({**STATIC_PROPS, **COOP_PROPS}), every_member_rebalances=False)

#: the coordinator recomputes the target on every membership change, but a member whose partitions do not move
#: only sees its epoch go up: the runner waits for the group's fixpoint (every partition held once, even loads,
#: one epoch), not for a rebalance from every member
KIP848 = replace(FAMILY, name="consumer-848", label="consumer-848 (KIP-848)",
                 colour="tab:brown", marker="D",
                 package="modern_coord.variants:KIP848", configure=_with_defaults(KIP848_PROPS),
                 every_member_rebalances=False, broker_config=KIP848_BROKER_CONFIG, computes="coordinator",
                 stops_by="committed, revoked and sent a leave heartbeat (member epoch -1; -2 for a static member)")

VARIANTS = (STATIC, COOP, STATIC_COOP, KIP848)
