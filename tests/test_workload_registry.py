"""Workloads declare what they need; the generic layers ask the registry (no kind is named there)."""

import re
from pathlib import Path

import ccbench.workloads as workloads
from ccbench.fleet import wheelhouse
from ccbench.workloads.base import DEVICE_IO_CHECK, TLS_AES_CHECK, Workload

REPO = Path(__file__).resolve().parents[1]


def test_set_up_components_and_python_extras_come_from_the_workloads():
    assert workloads.setup_components(["fio", "notebook", "pyperformance", "prime"]) == {"core", "datascience"}
    assert workloads.setup_components(["ycsb", "compression", "transport"]) == {"ycsb", "storage", "transport"}
    assert "datascience" in wheelhouse.plan_extras()
    assert "ml" not in wheelhouse.plan_extras()


def test_the_tls_check_is_asked_for_by_a_transport_kind_or_a_transport_variant():
    assert workloads.system_checks([("transport", [])]) == {TLS_AES_CHECK}
    assert workloads.system_checks([("command", ["storage"])]) == set()
    assert workloads.system_checks([("fio", ["storage"]), ("federated", ["transport"])]) == {
        TLS_AES_CHECK,
        DEVICE_IO_CHECK,
    }


def test_stale_cleanup_asks_only_kinds_with_a_directory_and_passes_over_one_that_cannot_load(tmp_path, monkeypatch):
    asked = []

    class Leaves(Workload):
        kind = "leaves"

        @classmethod
        def cleanup_stale(cls, workdir):
            asked.append(workdir)
            return [f"stopped what {cls.kind} left"]

        def run(self, ctx):
            return []

    import sys
    import types

    module = types.ModuleType("ccbench_test_leaves")
    module.Leaves = Leaves
    monkeypatch.setitem(sys.modules, "ccbench_test_leaves", module)
    monkeypatch.setitem(workloads.REGISTRY, "leaves", "ccbench_test_leaves:Leaves")
    # an optional dependency missing here: the kind cannot be imported
    monkeypatch.setitem(workloads.REGISTRY, "broken", "ccbench_no_such_module:Broken")
    assert workloads.cleanup_stale(tmp_path) == []
    assert asked == []
    (tmp_path / "leaves").mkdir()
    (tmp_path / "broken").mkdir()
    assert workloads.cleanup_stale(tmp_path) == ["stopped what leaves left"]
    assert asked == [tmp_path]


def test_no_generic_module_names_a_workload_kind():
    kinds = "|".join(re.escape(kind) for kind in ("microservices", "transport", "federated", "notebook"))
    for path in [REPO / "src/ccbench/runner.py", *sorted((REPO / "src/ccbench/fleet").glob("*.py"))]:
        assert not re.search(f'"({kinds})"', path.read_text()), path


def test_every_workload_declares_its_primary_metrics():
    """Each kind says which of its metrics are its application-level result (the verdict's basis),
    on its own class: an inherited empty tuple would silently leave a kind out of every verdict."""
    for kind in workloads.REGISTRY:
        cls = workloads.workload_class(kind)
        assert "primary_metrics" in vars(cls), f"{kind} does not declare primary_metrics"
        assert isinstance(cls.primary_metrics, tuple) and all(isinstance(m, str) for m in cls.primary_metrics)
        declared = workloads.declaration(cls)
        assert declared["kind"] == kind and declared["primary_metrics"] == list(cls.primary_metrics)
    # only the probe measures no application result
    assert [kind for kind in workloads.REGISTRY if not workloads.workload_class(kind).primary_metrics] == ["systeminfo"]
    # microbenchmark metrics are not primary
    assert "cell_s" not in workloads.workload_class("notebook").primary_metrics
    assert not {"rtt_p50", "handshake_p50", "throughput"} & set(workloads.workload_class("transport").primary_metrics)
