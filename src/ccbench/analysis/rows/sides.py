"""Which machines stand behind each configuration of a comparison, and the facts in which two sides'
machines differ (CPU model, vCPUs, memory with its boot-time bounce pool, SMT, kernel): what the lint
(ccbench.analysis.judgement.lint), the rows' "confounded by" flags (ccbench.analysis.rows.compare), the twins, the
pairing and the verdict all read. Pure functions over probe documents (ccbench.probe.facts)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ccbench.analysis.samples.codes import first_rows
from ccbench.probe.facts import machine_facts, microarchitecture
from ccbench.probe.lint import gib

#: two memory sizes closer than this (relative) are the same machine size: guests of one size
#: report a few percent apart (firmware and kernel reservations, a TEE's own tables)
MEMORY_TOLERANCE = 0.05

#: a side of a comparison: the machines (label, probe) behind one configuration
Side = list[tuple[str, Mapping[str, Any]]]


@dataclass
class Difference:
    fact: str
    baseline: list[Any]
    other: list[Any]
    #: for the CPU model: the names shown (the microarchitecture where known, else the brand string)
    shown: tuple[list[str], list[str]] | None = None
    #: the values as said where they are not one list a side (tool versions: "fio-3.33 vs fio-3.35")
    words: str = ""

    def text(self) -> str:
        if self.words:
            return f"{self.fact} ({self.words})"
        if self.shown:
            return f"{self.fact} ({', '.join(self.shown[0])} vs {', '.join(self.shown[1])})"
        show = gib if self.fact == "memory" else str
        return f"{self.fact} ({', '.join(map(show, self.baseline))} vs {', '.join(map(show, self.other))})"


def _bounce_pool(probe: Mapping[str, Any]) -> int:
    """The bytes of the swiotlb pool the kernel reserved at boot where the probe knows them (they
    are missing from MemTotal): a bounce-buffer twin's or a CVM's pool is part of its size."""
    pool = ((probe.get("provenance") or {}).get("swiotlb") or {}).get("bytes")
    return int(pool) if isinstance(pool, int | float) and pool > 0 else 0


def _side_values(side: Side, fact: str) -> list[Any]:
    values = []
    for _label, probe in side:
        value = machine_facts(probe)[fact]
        if value is not None and value not in values:
            values.append(value)
    return values


def _cpu_names(baseline: Side, other: Side) -> tuple[list[str], list[str]]:
    """Each side's CPUs by microarchitecture ("Ice Lake vs Sapphire Rapids") where every CPU's is
    known and the sides' differ; else by brand string (two Ice Lake models differ too)."""
    names = [[microarchitecture(probe) for _label, probe in side] for side in (baseline, other)]
    a, b = (list(dict.fromkeys(n)) for n in names)
    if None not in a + b and set(a) != set(b):
        return a, b
    return [str(v) for v in _side_values(baseline, "CPU model")], [str(v) for v in _side_values(other, "CPU model")]


def _sizes(side: Side) -> list[int]:
    """Each machine's memory with its boot-time bounce pool (MemTotal leaves the pool out): the size
    it was given, which is what two machines must share."""
    return [machine_facts(probe)["memory"] + _bounce_pool(probe) for _label, probe in side]


def _unknown(side: Side, fact: str) -> list[str]:
    return [label for label, probe in side if machine_facts(probe)[fact] is None]


def _memory_differs(a: list[Any], b: list[Any]) -> bool:
    low, high = sorted(a + b)[0], sorted(a + b)[-1]
    return high > low * (1 + MEMORY_TOLERANCE)


def differences(baseline: Side, other: Side) -> tuple[list[Difference], dict[str, list[str]]]:
    """(the facts in which the two sides differ, {fact: machines that do not record it})."""
    found, unknown = [], {}
    for fact in ("CPU model", "vCPUs", "memory", "SMT", "kernel"):
        missing = _unknown(baseline, fact) + _unknown(other, fact)
        if missing:
            unknown[fact] = list(dict.fromkeys(missing))
            continue
        a, b = _side_values(baseline, fact), _side_values(other, fact)
        if fact == "memory" and not _memory_differs(_sizes(baseline), _sizes(other)):
            continue
        if set(map(str, a)) != set(map(str, b)):
            found.append(Difference(fact, a, b, _cpu_names(baseline, other) if fact == "CPU model" else None))
    return found, unknown


#: the fact a difference in the measuring tools' versions is named by (its rows' "confounded by" flag)
TOOL_VERSIONS = "tool versions"


def _tools(probe: Mapping[str, Any]) -> dict[str, list[str]]:
    """The versions of the tools that measured, as the bundle states them (an imported source's fio,
    pyperf, Python...: environment.tools), each a list of one or more."""
    tools = probe.get("tools")
    if not isinstance(tools, Mapping):
        return {}
    return {str(k): [str(x) for x in v] if isinstance(v, list) else [str(v)] for k, v in tools.items() if v is not None}


def _version_text(tool: str, value: str) -> str:
    """ "fio-3.33" as fio states it, "python 3.10.13" where the value does not name its tool."""
    name = tool.removesuffix("_version").replace("_", " ")
    return value if value.lower().startswith(name.split()[0].lower()) else f"{name} {value}"


def tool_difference(baseline: Side, other: Side) -> Difference | None:
    """The tools both sides state in different versions (fio 3.33 against 3.35, Python 3.10 against 3.11):
    a difference between them may be the tool's; None where they agree or only one side states a tool."""
    sides = [[_tools(probe) for _label, probe in side] for side in (baseline, other)]
    words = []
    for tool in sorted({k for side in sides for tools in side for k in tools}):
        a, b = ([v for tools in side for v in tools.get(tool, [])] for side in sides)
        if a and b and set(a) != set(b):
            shown = [", ".join(_version_text(tool, v) for v in dict.fromkeys(values)) for values in (a, b)]
            words.append(f"{shown[0]} vs {shown[1]}")
    if not words:
        return None
    return Difference(TOOL_VERSIONS, [], [], words="; ".join(words))


def confounded_by(found: list[Difference]) -> str:
    """ "CPU model (Ice Lake vs Sapphire Rapids) and kernel (5.15 vs 6.8)" """
    texts = [d.text() for d in found]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def confounded_flags(
    frame: Any, baselines: Iterable[str], configs: Iterable[str], machines: Mapping[str, Mapping[str, Any]]
) -> list[str | None]:
    """Per comparison row (its baseline and configuration): "confounded by <what>" where the
    machines behind the two sides differ in a confounding fact, or the tools that measured them in
    their versions (tool_difference), else None. ``machines`` maps the
    frame's ``bundle`` column to that bundle's probe."""
    sides = config_sides(frame, machines)
    cache: dict[tuple[str, str], str | None] = {}
    out = []
    for base, config in zip(baselines, configs, strict=True):
        if (base, config) not in cache:
            found, _unknown_facts = differences(sides.get(base, []), sides.get(config, []))
            tools = tool_difference(sides.get(base, []), sides.get(config, []))
            found += [tools] if tools else []
            cache[(base, config)] = f"confounded by {confounded_by(found)}" if found else None
        out.append(cache[(base, config)])
    return out


def distinct_rows(frame: Any, keys: list[str]) -> Any:
    """The first row of each distinct combination of ``keys`` (few of them in millions of rows), in
    row order: the engine's integer-key way (ccbench.analysis.samples.codes.first_rows)."""
    return frame.iloc[first_rows(*(frame[key].to_numpy() for key in keys))]


def config_sides(frame: Any, machines: Mapping[str, Mapping[str, Any]]) -> dict[str, Side]:
    """{configuration: [(machine label, probe)] of the bundles measured under it}."""
    pairs = distinct_rows(frame, ["config", "bundle"])[["config", "machine", "bundle"]]
    sides: dict[str, Side] = {}
    for config, machine, bundle in pairs.itertuples(index=False):
        probe = machines.get(str(bundle))
        if probe is not None:
            sides.setdefault(str(config), []).append((str(machine), probe))
    return sides
