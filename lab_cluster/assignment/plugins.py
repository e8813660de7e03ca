"""Your own assignor: a class named in `partition.assignment.strategy`, beside the built-in names.

Kafka's consumer takes a list of assignors, most preferred first, each a
built-in name's class or a user's (`ConsumerPartitionAssignor.getAssignorInstances`):
it loads each class, makes one instance per consumer, hands it the consumer's
config if it wants it (`Configurable.configure`), and refuses a class that is not
an assignor or two assignors with one name. The lab does the same with Python:
an entry with a colon is `package.module:Class`, imported from the consumer's
`sys.path` (the working directory included), a subclass of
`lab_cluster.assignment.Assignor`. Every other entry is a built-in name.

    >>> [a.name for a in assignors(["range", "examples.weighted_assignor:WeightedAssignor"])]
    ['range', 'weighted']
    >>> try:
    ...     assignors(["range", "examples.weighted_assignor:Missing"])
    ... except LabError as e:
    ...     print(e.problem)
    partition.assignment.strategy: examples.weighted_assignor has no class Missing.

What a member does with them is Kafka's: one JoinGroup protocol per assignor,
in the order listed, each with that assignor's `subscription_user_data`; the
coordinator picks the protocol the members vote for; the leader runs that
assignor's `assign` over every member's subscription; each member hands its
share to that assignor's `on_assignment` (`modern_coord/consumer.py`).
"""

from __future__ import annotations

import importlib
import inspect

from lab_cluster.errors import LabError

from .base import Assignor

_HOW = ("Name a built-in assignor, or your own as package.module:Class, a subclass of "
        "lab_cluster.assignment.Assignor importable from where the consumer runs.")


def is_plugin(entry: str) -> bool:
    """Whether a strategy entry names a class (`package.module:Class`) rather than a built-in assignor."""
    return ":" in entry


def load_class(entry: str) -> type[Assignor]:
    """The assignor class `package.module:Class` names, or a LabError that says what is wrong."""
    module_name, _, class_name = entry.partition(":")
    where = f"partition.assignment.strategy: {entry}"
    if not module_name or not class_name:
        raise LabError(f"{where} is not package.module:Class.", _HOW)
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:  # Kafka: "<class> ClassNotFoundException exception occurred"
        raise LabError(f"{where}: no module {module_name} ({e}).", _HOW) from None
    except Exception as e:  # the module's own code failed while it was imported
        raise LabError(f"{where}: importing {module_name} failed: {type(e).__name__}: {e}.", _HOW) from None
    found = getattr(module, class_name, None)
    if found is None:
        raise LabError(f"partition.assignment.strategy: {module_name} has no class {class_name}.", _HOW)
    if not inspect.isclass(found) or not issubclass(found, Assignor):
        # Kafka: "<class> is not an instance of org.apache.kafka.clients.consumer.ConsumerPartitionAssignor"
        raise LabError(f"{where} is not a subclass of lab_cluster.assignment.Assignor.", _HOW)
    if inspect.isabstract(found):
        missing = ", ".join(sorted(found.__abstractmethods__))
        raise LabError(f"{where} does not implement {missing}.", _HOW)
    return found


def assignors(strategies: list[str], config: dict | None = None) -> list[Assignor]:
    """One consumer's assignors, in its order of preference: the built-in instances, and a new instance of each
    user's class, given `config` (the consumer's properties) if it has `configure`.

    Two assignors with one `name` are refused, as Kafka refuses them ("The assignor name ... is used in more
    than one assignor"): the coordinator's vote and the leader's choice go by name.
    """
    from . import ASSIGNORS

    chosen: list[Assignor] = []
    for entry in strategies:
        if not is_plugin(entry):
            if entry not in ASSIGNORS:
                raise LabError(f"partition.assignment.strategy: unknown assignor {entry!r}; built in: "
                               f"{', '.join(sorted(ASSIGNORS))}.", _HOW)
            chosen.append(ASSIGNORS[entry])
            continue
        cls = load_class(entry)
        try:
            assignor = cls()
            if hasattr(assignor, "configure"):
                assignor.configure(dict(config or {}))
        except LabError:
            raise
        except Exception as e:
            raise LabError(f"partition.assignment.strategy: {entry} failed to start: {type(e).__name__}: {e}.",
                           "Fix the assignor's constructor or its configure(), or its settings.") from None
        if not isinstance(getattr(assignor, "name", None), str) or not assignor.name:
            raise LabError(f"partition.assignment.strategy: {entry} has no name (a non-empty str).", _HOW)
        chosen.append(assignor)
    names = [a.name for a in chosen]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LabError(f"partition.assignment.strategy: the assignor name {twice[0]!r} is used by more than one "
                       "assignor.", "Give each assignor a name of its own (its `name` attribute).")
    return chosen
