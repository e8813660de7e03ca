"""The experiment registry: each experiment registered once, and everything the runner and the report need from
it reachable through that one entry (its trials, its pytest marker, its report section, its findings' ids)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from experiments.catalogue import DESIGNS, EXPERIMENTS
from experiments.engine.experiment import Experiment
from lab_cluster.errors import LabError

MARKERS = {line.split(":")[0] for line in tomllib.loads(
    (Path(__file__).parent.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_an_experiment_brings_its_trials_marker_and_report_section(name):
    experiment = EXPERIMENTS[name]
    assert isinstance(experiment, Experiment) and experiment.name == name
    assert name in MARKERS  # `pytest -m <name>` selects its end-to-end test
    assert {"standard", "full"} <= set(experiment.profiles)  # every design keeps its place in both
    for profile in experiment.profiles:
        specs = experiment.specs(profile)
        assert specs and {s.experiment for s in specs} == {name}
        assert {s.design for s in specs} == set(experiment.designs_in(profile))
    assert experiment.designs_in("standard") == experiment.designs_in("full") == experiment.designs
    for section in (experiment.section, experiment.full_section or experiment.section):
        module, function = section.split(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function))


def test_the_tour_runs_the_lineages_answer_and_says_why_each_part_is_in():
    tour = {name: e.designs_in("tour") for name, e in EXPERIMENTS.items() if e.runs_in("tour")}
    assert tour == {"herd": ("zookeeper", "classic", "consumer-848"), "split_brain": ("zookeeper", "classic"),
                    "zombie": ("zookeeper", "classic")}
    for name in tour:
        assert len(EXPERIMENTS[name].profiles["tour"]["why"]) > 40
    # enough group sizes for the growth findings; both ends of the lag; both zombie variants
    assert len({s.consumers for s in EXPERIMENTS["herd"].specs("tour")}) == 3
    assert {dict(s.params)["follower_delay_ms"] for s in EXPERIMENTS["split_brain"].specs("tour")} == {0, 1000}
    assert {s.variant for s in EXPERIMENTS["zombie"].specs("tour")} == {"pause", "cut"}


def test_quick_is_the_standard_profiles_old_name():
    from experiments.engine.profiles import canonical

    herd = EXPERIMENTS["herd"]
    assert canonical("quick") == "standard" and herd.specs("quick") == herd.specs("standard")
    with pytest.raises(LabError, match="first_message has no tour profile"):
        EXPERIMENTS["first_message"].specs("tour")


def test_designs_are_those_the_experiments_run_in_a_stable_order():
    assert DESIGNS == ("zookeeper", "classic", "consumer-848", "rocketmq", "tubemq", "kafka-python", "librdkafka",
                       "real-kafka-0.8.2.2", "real-kafka-4", "real-rocketmq-4.9", "real-kafka-3.9", "tubemq-server",
                       "classic-static", "classic-coop", "classic-static-coop")
    assert set(DESIGNS) == {d for e in EXPERIMENTS.values() for d in e.designs}


def test_the_grid_schema_is_the_spec_itself():
    from experiments.engine.harness import GRID_SCHEMA

    for experiment in EXPERIMENTS.values():
        for spec in experiment.grid("standard"):
            assert list(spec.as_row()) == [f.name for f in GRID_SCHEMA.fields]


def test_outside_the_registries_no_code_names_a_family():
    """The runner, metrics, report and CLI read `Family` descriptors; only the registry and the experiments (whose
    trials and findings are about designs) name one. Docstrings may, to teach."""
    import ast
    from pathlib import Path

    from experiments.engine.families import FAMILIES

    names = set(FAMILIES) | {f.package for f in FAMILIES.values()}
    root = Path(__file__).resolve().parent.parent / "experiments"
    checked = [p for layer in ("engine", "report", "cli") for p in (root / layer).glob("*.py")] + [root / "metrics.py"]
    offenders = []
    for path in checked:
        prose = ("herd.py", "faults.py", "first_message.py", "compare.py", "real_clients.py", "front.py", "beside.py",
                 "conformance.py", "growth.py")
        if path.name == "families.py" or path.parent.name == "report" and path.name in prose:
            continue  # the registry; each experiment's own prose, the comparison's and the first screen's
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if node.value in names or any(node.value.startswith(f"{n}.") for n in names):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    assert len(checked) > 15 and offenders == []
