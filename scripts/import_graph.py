"""The import graph of src/ccbench, measured: upward imports, import circles, module sizes, and the
rooms a command's call path walks through.

    python scripts/import_graph.py [--root DIR] [--config PYPROJECT] [--trace history-add|compare]

Every ``import`` counts, also those inside functions (a lazy import still ties two rooms together);
imports under ``if TYPE_CHECKING:`` are counted apart, as import-linter is told to skip them. The
layers are read from the ``layers`` contract in ``[tool.importlinter]`` of the config (default: the
root's pyproject.toml), so this script and ``lint-imports`` judge by the same drawing: an import is
upward when the imported module's layer is above the importer's, or when both sit in independent
siblings of one layer (``a | b``). ``--trace`` runs a command in this process over three test
bundles and prints the modules its calls pass through, with the calls that climb a layer.
"""

from __future__ import annotations

import argparse
import ast
import collections
import statistics
import sys
import tomllib
from pathlib import Path

PACKAGE = "ccbench"
IMPORTING = "<import>"


def modules(src: Path) -> dict[str, Path]:
    found = {}
    for path in (src / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            full = ".".join(base + ([node.module] if node.module else []))
        else:
            full = node.module or ""
        return [f"{full}.{alias.name}" for alias in node.names]
    return []


def edges(found: dict[str, Path]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(importer, imported) pairs between ccbench modules: at run time, and under TYPE_CHECKING."""

    def resolve(name: str) -> str:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name

    runtime, typing_only = set(), set()
    for module, path in found.items():
        tree = ast.parse(path.read_text())
        guarded = {id(n) for g in ast.walk(tree) if _type_checking(g) for b in g.body for n in ast.walk(b)}
        for node in ast.walk(tree):
            for name in _imported(node, module, path.name == "__init__.py"):
                target = resolve(name)
                if target.startswith(PACKAGE) and target != module:
                    (typing_only if id(node) in guarded else runtime).add((module, target))
    return runtime, typing_only - runtime


def circles(pairs: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = collections.defaultdict(set)
    for a, b in pairs:
        graph[a].add(b)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in list(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def layers(config: Path) -> list[list[str]]:
    """The layers contract's layers, top first, each a list of sibling modules (``|`` or ``:``)."""
    settings = tomllib.loads(config.read_text()).get("tool", {}).get("importlinter", {})
    for contract in settings.get("contracts", []):
        if contract.get("type") == "layers":
            container = (contract.get("containers") or [""])[0]
            out = []
            for line in contract["layers"]:
                line = line.strip("()")
                names = [n.strip() for n in line.replace(":", "|").split("|")]
                out.append([f"{container}.{n}" if container else n for n in names])
            return out
    raise SystemExit(f"{config}: no layers contract in [tool.importlinter]")


def rank_of(drawn: list[list[str]]):
    def rank(module: str) -> tuple[int, str] | None:
        for depth, siblings in enumerate(drawn):
            for sibling in siblings:
                if module == sibling or module.startswith(sibling + "."):
                    return depth, sibling
        return None

    return rank


def upward(pairs: set[tuple[str, str]], drawn: list[list[str]]) -> list[tuple[str, str]]:
    rank = rank_of(drawn)
    out = []
    for a, b in sorted(pairs):
        ra, rb = rank(a), rank(b)
        if ra and rb and (rb[0] < ra[0] or (rb[0] == ra[0] and ra[1] != rb[1])):
            out.append((a, b))
    return out


def sizes(found: dict[str, Path]) -> dict[str, int]:
    return {m: len(p.read_text().splitlines()) for m, p in found.items()}


def trace(command: str, drawn: list[list[str]]) -> tuple[list[tuple[str, str]], collections.Counter]:
    """The calls of a command from one room into another (a room: a layer's entry, ``analysis``,
    ``bundle``, ``results``, ...; as (caller room, callee room), in call order), and the calls that
    climb to a higher layer ({(caller, callee) module: count}). Imports (module-level code) are not calls. Runs over three test bundles
    in a temporary directory."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import bundles  # tests/bundles.py: the suite's bundle writer
    from click.testing import CliRunner

    from ccbench.cli import cli

    rank = rank_of(drawn)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [str(p) for p in bundles.write_bundles(Path(tmp), per_case=4)]
        args = {
            "history-add": ["history", "add", *paths, "--store", str(Path(tmp) / "store.duckdb")],
            "compare": ["compare", *paths],
        }[command]
        crossings: list[tuple[str, str]] = []
        climbs: collections.Counter = collections.Counter()
        stack: list[str] = []

        def ours(frame) -> str | None:
            module = frame.f_globals.get("__name__", "")
            if not module.startswith(PACKAGE + ".") or module.startswith("ccbench.cli"):
                return None
            # a module's own code runs when it is imported: calls made from it are no road taken
            return IMPORTING if frame.f_code.co_name == "<module>" else module

        def room_of(module: str) -> str:
            found = rank(module)
            return found[1].removeprefix(PACKAGE + ".") if found else module

        def profile(frame, event, _arg):
            module = ours(frame)
            if module is None:
                return
            if event == "call":
                caller = stack[-1] if stack else None
                if caller not in (None, IMPORTING) and module != IMPORTING and room_of(caller) != room_of(module):
                    crossings.append((room_of(caller), room_of(module)))
                    caller_rank, callee_rank = rank(caller), rank(module)
                    if caller_rank and callee_rank and callee_rank[0] < caller_rank[0]:
                        climbs[(caller, module)] += 1
                stack.append(module)
            elif event == "return" and stack:
                stack.pop()

        sys.setprofile(profile)
        try:
            result = CliRunner().invoke(cli, args, catch_exceptions=True)
        finally:
            sys.setprofile(None)
        if result.exit_code != 0:
            raise SystemExit(f"{command}: exit {result.exit_code}: {result.output[-500:]} {result.exception!r}")
    return crossings, climbs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--config", type=Path, default=None, help="pyproject.toml with the layers contract")
    parser.add_argument("--trace", choices=["history-add", "compare"], action="append", default=[])
    parser.add_argument("-v", "--verbose", action="store_true", help="list each upward import and circle")
    args = parser.parse_args()
    found = modules(args.root / "src")
    runtime, typing_only = edges(found)
    drawn = layers(args.config or args.root / "pyproject.toml")
    up = upward(runtime, drawn)
    rings = circles(runtime)
    typing_rings = [r for r in circles(runtime | typing_only) if r not in rings]
    lines = sizes(found)
    unplaced = sorted(m for m in found if rank_of(drawn)(m) is None and m != PACKAGE)
    print(f"modules: {len(found)}, imports between them: {len(runtime)} (+{len(typing_only)} under TYPE_CHECKING)")
    print(f"upward imports (against the layers drawn): {len(up)}")
    print(f"import circles: {len(rings)} (+{len(typing_rings)} closed only under TYPE_CHECKING)")
    print(
        f"lines per module: median {statistics.median(lines.values()):.0f}, "
        f"mean {statistics.fmean(lines.values()):.0f}, max {max(lines.values())} "
        f"({max(lines, key=lines.get)}), over 500: {sum(v > 500 for v in lines.values())}"
    )
    if args.verbose:
        for a, b in up:
            print(f"  up: {a} -> {b}")
        for ring in rings:
            print(f"  circle: {' <-> '.join(ring)}")
        for ring in typing_rings:
            print(f"  circle under TYPE_CHECKING: {' <-> '.join(ring)}")
        if unplaced:
            print(f"  in no layer: {', '.join(unplaced)}")
    for command in args.trace:
        crossings, climbs = trace(command, drawn)
        roads = collections.Counter(crossings)
        print(
            f"{command}: {len(crossings)} calls from one room into another over {len(roads)} distinct roads, "
            f"{sum(climbs.values())} of them climb a layer ({len(climbs)} distinct)"
        )
        if args.verbose:
            print("  roads: " + ", ".join(f"{a}->{b} ({n})" for (a, b), n in sorted(roads.items())))
            for (caller, callee), count in sorted(climbs.items()):
                print(f"  climbs: {caller} -> {callee} ({count})")


if __name__ == "__main__":
    main()
