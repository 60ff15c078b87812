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


def _kinds_own_code(relative: Path, kinds: set[str]) -> bool:
    """A module whose job is one kind, or the list of them: a workload's own module or package (all
    of workloads/ but the registry's two generic modules), a family's report section (named for its
    kind), the importers (each format's adapter makes that kind's samples), the tools' parsers."""
    parts = relative.parts
    if parts[0] == "workloads":
        return relative.name not in ("__init__.py", "base.py") or len(parts) > 2
    if parts[:2] == ("report", "sections"):
        stem = relative.stem
        return stem in kinds or stem.removesuffix("s") in kinds
    # a tool's parser (formats/): named for its tool, which may also be a kind (fio) or map a study's
    # names to kinds (seed000)
    return parts[:2] == ("results", "importers") or parts[0] == "formats"


#: generic modules that may name kinds, each with its reason
NAMING_KINDS = {
    # the registry: kind -> its module
    Path("workloads/__init__.py"),
    # the seed-000 CSV plan's rows are the seed's own kinds (fio, notebook, pyperformance, systeminfo)
    Path("planning/plan.py"),
    # the import formats' names (fio is a format as well as a kind)
    Path("commands/import.py"),
}


def test_no_generic_module_names_a_workload_kind():
    """Every module of src/ccbench, discovered, is generic unless it is a kind's own code; a generic
    module never names a kind. A kind whose name has another meaning in generic code (a variant axis:
    transport; a word: command) is checked where a kind is compared with it."""
    from ccbench.variants import AXES

    kinds = set(workloads.REGISTRY)
    ambiguous = {kind for kind in kinds if kind in AXES} | {"command"}
    plain = "|".join(re.escape(kind) for kind in sorted(kinds - ambiguous))
    named = re.compile(f"[\"']({plain})[\"']")
    other = "|".join(re.escape(kind) for kind in sorted(ambiguous))
    compared = re.compile(f"kind\\w*\\s*(==|!=)\\s*[\"']({other})[\"']|[\"']({other})[\"']\\s*(==|!=)\\s*\\w*kind")
    package = REPO / "src/ccbench"
    checked, found = 0, []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if _kinds_own_code(relative, kinds) or relative in NAMING_KINDS:
            continue
        checked += 1
        text = path.read_text()
        found += [f"{relative}: {m.group(0)}" for m in (*named.finditer(text), *compared.finditer(text))]
    assert not found, found
    assert checked > 80  # the discovery found the generic modules (runner, fleet, analysis, report, ...)


def test_the_kind_check_finds_a_kind_named_in_a_generic_module(tmp_path, monkeypatch):
    """The check above can fail: a generic module naming a kind, or comparing a kind with an
    ambiguous one, is found."""
    package = tmp_path / "src/ccbench"
    (package / "analysis/samples").mkdir(parents=True)
    (package / "workloads").mkdir()
    (package / "workloads/fio.py").write_text('KIND = "fio"\n')  # a kind's own module: allowed
    for text in ('if kind == "fio":\n    pass\n', 'if spec.kind == "transport":\n    pass\n'):
        (package / "analysis/samples/engine.py").write_text(text)
        monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
        try:
            test_no_generic_module_names_a_workload_kind()
        except AssertionError as failure:
            assert "analysis/samples/engine.py" in str(failure)
        else:
            raise AssertionError(f"not found: {text!r}")


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


def test_the_tools_the_fleet_ships_come_from_the_workloads():
    # mechanisms ships ccmech: this machine's file, or why there is none; fio ships nothing
    (tool,) = workloads.shipped_tools(["mechanisms"]).items()
    assert tool[0] == "ccmech" and (isinstance(tool[1], Path) or "ccmech is not built" in tool[1])
    assert workloads.shipped_tools(["fio", "prime"]) == {}
    assert "ccmech" in workloads.shipped_tools()
