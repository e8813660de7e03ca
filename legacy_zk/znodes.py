"""The consumer group's znodes, as Kafka 0.8's `ZKGroupDirs` and `ZKGroupTopicDirs` laid them out.

    /consumers/<group>/ids/<consumerId>          ephemeral registration (registration.py)
    /consumers/<group>/owners/<topic>/<p>        ephemeral owner claim, value: the thread id (ownership.py)
    /consumers/<group>/offsets/<topic>/<p>       committed offset, a decimal string (offsets.py)

    >>> ids_path("g"), owner_path("g", "t", 3), offset_path("g", "t", 3)
    ('/consumers/g/ids', '/consumers/g/owners/t/3', '/consumers/g/offsets/t/3')
"""


def ids_path(group: str) -> str:
    return f"/consumers/{group}/ids"


def consumer_path(group: str, consumer_id: str) -> str:
    return f"{ids_path(group)}/{consumer_id}"


def owners_path(group: str, topic: str) -> str:
    return f"/consumers/{group}/owners/{topic}"


def owner_path(group: str, topic: str, partition: int) -> str:
    return f"{owners_path(group, topic)}/{partition}"


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"/consumers/{group}/offsets/{topic}/{partition}"
