"""No import circle in src/ccbench, imports inside functions and under TYPE_CHECKING counted (the
layers contract sees only the top level's packages). The circles left are named below, each for the
change that removes it; the list may only shrink: a new circle fails naming it (issue "One house")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: circles not broken yet, as scripts/import_graph.py names them (sorted ring members): none left (the
#: last, under TYPE_CHECKING, chain <-> tiers: the tiers name a Protocol of what they use of the chain)
KNOWN: set[tuple[str, ...]] = set()


def _graph():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rings(graph, src: Path) -> set[tuple[str, ...]]:
    runtime, typing_only = graph.edges(graph.modules(src))
    return {tuple(sorted(ring)) for ring in graph.circles(runtime | typing_only)}


def test_no_import_circle_but_the_known_ones():
    found = _rings(_graph(), REPO / "src")
    new = found - KNOWN
    assert not new, "import circles: " + "; ".join(" <-> ".join(ring) for ring in sorted(new))


def test_a_planted_circle_is_found_and_named(tmp_path):
    package = tmp_path / "ccbench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from ccbench.b import g\n    return g\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ccbench.a import f\n")
    assert _rings(_graph(), tmp_path) == {("ccbench.a", "ccbench.b")}


def _packages(src: Path) -> set[str]:
    """Every package of src/ccbench with two modules or more of its own (its rooms)."""
    found = set()
    for init in (src / "ccbench").rglob("__init__.py"):
        children = [
            p
            for p in init.parent.iterdir()
            if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())
        ]
        if len(children) > 1:
            found.add(".".join(init.parent.relative_to(src).parts))
    return found


#: packages whose modules are not a stack: bundled notebooks, and the scripts OpenFL's own environment runs
NOT_A_STACK = {"ccbench.notebooks", "ccbench.workloads.federated.workspace_files"}


def test_every_package_has_a_layers_contract():
    """The layers contract sees only the modules a container holds directly: each package (and
    sub-package) of more than one module is a container of its own contract in pyproject.toml."""
    import tomllib

    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    containers = {c for contract in settings["contracts"] for c in contract.get("containers", [])}
    missing = _packages(REPO / "src") - containers - NOT_A_STACK
    assert not missing, f"packages without a layers contract in pyproject.toml: {sorted(missing)}"
    assert not settings.get("ignore_imports") and not any(c.get("ignore_imports") for c in settings["contracts"])
