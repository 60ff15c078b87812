"""One road from bundles to a comparison: the bundles read (their manifests and probes), their samples
reduced in the engine (ccbench.analysis.samples.engine), the rows against the baseline (ccbench.analysis.rows.compare),
the verdict per layer and the lint's findings. ``ccbench compare`` and the report call ``comparison``;
the fleet runs both commands over the gathered bundles (ccbench.fleet.gather says why as processes of
their own). Nothing else strings these steps together, so the three cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ccbench.analysis.judgement.lint import bundle_machines, lint_comparison
from ccbench.analysis.judgement.lint_cipher import STORAGE_CEILING, THROUGHPUT, TRANSPORT_CEILING
from ccbench.analysis.rows.baselines import least_protected, resolve_baseline
from ccbench.analysis.rows.compare import NOISY_CV, compare
from ccbench.analysis.rows.reduce import reduced
from ccbench.analysis.samples.engine import SampleSet, sample_set
from ccbench.analysis.samples.load import load_bundles, own_path_variants
from ccbench.analysis.samples.series import measured_series, tail_series
from ccbench.analysis.settling.fleet_settle import fleet_settled_cases
from ccbench.analysis.settling.settled import settled_cases, with_settled
from ccbench.basics.errors import CCBenchError
from ccbench.basics.helper import Helper


@dataclass
class Comparison:
    #: the bundles read (ccbench.bundle.Bundle, without their samples: the engine reads those)
    bundles: list[Any]
    #: the engine's reduction of their samples
    engine: SampleSet
    #: {the frame's ``bundle``: that bundle's probe}, and whether each bundle's plan moves data through devices
    machines: dict[str, dict[str, Any]]
    device_io: dict[str, bool | None]
    #: the configuration compared against (resolved from the one asked for); None: no measured samples
    baseline: str | None
    #: one row per group and configuration other than the group's baseline (ccbench.analysis.rows.compare)
    table: pd.DataFrame
    exclude_contended: bool = False
    #: the cases runs and fleets settled (ccbench.analysis.settling.settled.settled_cases), by row key
    cases: dict = field(default_factory=dict)
    #: the ``--pair CONFIG=BASELINE`` values asked for
    pairs: tuple[str, ...] = ()

    def verdicts(self) -> list:
        """The verdict per protection layer (reads the engine's bounded per-sample frame)."""
        from ccbench.analysis.judgement.verdict import verdicts

        return verdicts(self.table, self.engine.sample, self.machines)

    def findings(self, per_sample: bool = True) -> list:
        """The lint's findings on the compared machines. ``per_sample`` False: read only the rows the
        lint needs from the engine (no per-sample frame was made)."""
        rows = self.engine.sample if per_sample else _lint_rows(self.engine)
        executions = {str(bundle.path): bundle.executions for bundle in self.bundles}
        series, tails = measured_series(self.engine), tail_series(self.engine)
        own_paths = own_path_variants(self.bundles, self.engine.facts)
        return lint_comparison(rows, self.table, self.machines, self.device_io, series, executions, tails, own_paths)

    def uncompared(self) -> list[str]:
        """The machines (labels) none of whose configurations is in any row, as the baseline or the
        compared side: no workload in common with the baseline they would stand against. Said beside
        the verdict, so that nothing is left out in silence."""
        return uncompared(self.engine.facts, self.table)

    def implausible_settled(self) -> set[tuple[str, str, str, str]]:
        """(bundle path, workload, variant key, case label) of the settled cases whose rows are
        implausible (left out of the verdict), so the settle summary says so beside their answer."""
        if self.table.empty or "implausible" not in self.table:
            return set()
        flagged = self.table[self.table["implausible"].fillna("").astype(str) != ""]
        keys = set(zip(*(flagged[c] for c in ("workload", "metric", "params", "baseline", "config"))))
        return {
            (case["bundle"], key[0], case["variant"], case["label"])
            for key, case in self.cases.items()
            if key in keys and case.get("variant")
        }

    def require_rows(self) -> None:
        """An empty comparison is an error that says why: everything left out as contended, failed
        executions, no case in common, each workload measured in one configuration, or pairs (or a
        baseline) that set no configuration against another on a workload both measured."""
        if not self.table.empty:
            return
        counts = self.engine.counts()
        contended = int(counts["contended"].sum())
        if self.exclude_contended and contended:
            raise CCBenchError(
                f"--exclude-contended: {contended} of {int(counts['measured'].sum())} measured samples came from "
                "contended executions "
                "and what is left holds nothing to compare; run again on a quiet machine, or compare without the "
                "option (the contended rows are then flagged)"
            )
        by_workload = measured_series(self.engine).groupby("workload", sort=True)["config"].unique()
        by_workload = {str(w): sorted(map(str, c)) for w, c in by_workload.items()}
        measured = "; ".join(f"{w}: {', '.join(c)}" for w, c in by_workload.items()) or "no measured samples"
        failed = failed_bundles(self.bundles)
        if failed:
            raise CCBenchError(
                f"nothing to compare: {'; '.join(failed)}; what is left measured {measured} (workload: its "
                "configurations): there is no figure for a configuration whose executions failed"
            )
        disjoint = _disjoint_cases(self.engine)
        if disjoint:
            raise CCBenchError(
                f"nothing to compare: the configurations share no case ({disjoint}); a case is compared only "
                "with the same case (the same command, parameters and metric) elsewhere"
            )
        several = {w: c for w, c in by_workload.items() if len(c) > 1}
        if not several:
            raise CCBenchError(
                f"nothing to compare: each workload was measured in one configuration ({measured}); "
                "give bundles from other machines or runs with several variants"
            )
        # several configurations measured a workload, but none was set against another on it: the
        # pairs or the baseline asked for chose configurations that share no workload
        asked = " ".join(f"--pair {p!r}" for p in self.pairs) or f"the baseline {self.baseline!r}"
        what = "pair two of them" if self.pairs else "give one of them as --baseline"
        shared = "; ".join(f"{w}: {', '.join(c)}" for w, c in several.items())
        raise CCBenchError(
            f"nothing to compare: {asked} sets no configuration against another on a workload both measured; "
            f"the workloads measured in several configurations: {shared}; {what}"
        )


def _disjoint_cases(engine) -> str:
    """Where two or more configurations measured the same workload but no case of it in common (two
    hyperfine files of different commands): each configuration's cases in words; else ""."""
    connection = engine.connection()
    try:
        pairs = connection.sql("SELECT DISTINCT cfg, grp FROM measured ORDER BY cfg, grp").fetchall()
    finally:
        connection.close()
    by_config: dict[str, set[tuple]] = {}
    for cfg, grp in pairs:
        workload, _params, case, metric = engine.groups[grp]
        by_config.setdefault(engine.configs[cfg], set()).add((workload, case or "", metric))
    if len(by_config) < 2:
        return ""
    workloads = [{k[0] for k in keys} for keys in by_config.values()]
    if not set.intersection(*workloads):
        return ""
    seen: dict[tuple, int] = {}
    for keys in by_config.values():
        for key in keys:
            seen[key] = seen.get(key, 0) + 1
    if any(count > 1 for count in seen.values()):
        return ""
    return "; ".join(
        f"{config}: {', '.join(sorted(f'{w} {c!r} {m}' if c else f'{w} {m}' for w, c, m in keys))}"
        for config, keys in by_config.items()
    )


def uncompared(facts: pd.DataFrame, table: pd.DataFrame | None) -> list[str]:
    """The machines (labels) of ``facts`` none of whose configurations is in a row of ``table``."""
    if facts is None or facts.empty or table is None:
        return []
    shown = set(table["baseline"].astype(str)) | set(table["config"].astype(str)) if not table.empty else set()
    machines = dict.fromkeys(facts["machine"].astype(str))
    having = {str(m) for m, c in zip(facts["machine"], facts["config"], strict=True) if str(c) in shown}
    return [m for m in machines if m not in having]


def failed_bundles(bundles: Iterable[Any]) -> list[str]:
    """'<label>: no sample, every execution failed (why)' for each bundle without a measured sample
    because its executions failed (an imported hyperfine command whose every run exited non-zero)."""
    said = []
    for bundle in bundles:
        records = [r for r in bundle.executions if not r.get("warmup")]
        if records and all(r.get("status") not in (None, "ok") for r in records):
            label = (bundle.manifest or {}).get("label") or bundle.path.name
            why = "; ".join(sorted({str(r.get("error") or r.get("status")) for r in records}))
            said.append(f"{label}: no sample, every execution failed ({why})")
    return said


def comparison(
    paths: Iterable[str | Path],
    labels: dict[str, str] | None = None,
    baseline: str | None = None,
    *,
    helper: Helper | None = None,
    frame: bool = True,
    noisy_cv: float = NOISY_CV,
    exclude_contended: bool = False,
    pairs: Iterable[str] = (),
) -> Comparison:
    """The comparison of the bundles (or directories of bundles) at ``paths``: ``baseline`` a
    configuration, a machine label or None (the first bundle's least protected configuration).
    ``frame`` False: the engine makes no per-sample frame (enough for the rows alone). ``pairs``:
    "CONFIG=BASELINE" (globs on machine labels or configurations): each matching machine compared
    with its own baseline; without pairs and without ``baseline``, each TEE machine is paired with a
    machine without a TEE of the same CPU vendor and model (else vendor) where one exists
    (matched_pairs)."""
    bundles = load_bundles(paths, samples=False)
    engine = sample_set(bundles, labels, helper, frame=frame)
    machines, device_io = bundle_machines(bundles)
    # resolved on the configurations compare itself ranks (in order of first appearance, of the
    # quiet samples when contended ones are left out), so the baseline named is the one compared to;
    # when nothing quiet is left, on all of them (the report still names its baseline)
    facts = _in_order(engine, "first_quiet" if exclude_contended else "first")
    if facts.empty and exclude_contended:
        facts = _in_order(engine, "first")
    resolved = resolve_baseline(facts, baseline) if not facts.empty else None
    given = parse_pairs(pairs, facts) if pairs else []
    shared = _workloads_of(engine, facts)
    matched = given or (matched_pairs(facts, machines, shared) if baseline is None and not facts.empty else [])

    # the statistics per group and configuration, reduced once for every baseline compared against
    statistics = reduced(engine, exclude_contended)

    def against(chosen):
        return compare(
            engine, chosen, noisy_cv, exclude_contended=exclude_contended, machines=machines, statistics=statistics
        )

    if not matched:
        table = against(resolved if resolved is not None else baseline)
    else:
        table = _paired(facts, matched, against, None if given else resolved)
        resolved = resolve_baseline(facts, matched[0][1])
    table = _with_own_layers(facts, table, against)
    table = _with_tee_twins(facts, table, against)
    if not given:
        table = cross_vendor_rows(table, facts, machines)
    # the cases a run settled: on the interval its record names, so compare says what the run said
    cases = settled_cases(bundles, labels, exclude_contended)
    # and the cases a fleet settled across its labels (ccbench.analysis.settling.fleet_settle): the controller's rule
    cases.update(fleet_settled_cases(bundles, labels, exclude_contended))
    table = with_settled(table, cases, facts) if cases else table
    return Comparison(bundles, engine, machines, device_io, resolved, table, exclude_contended, cases, tuple(pairs))


def parse_pairs(pairs: Iterable[str], facts: pd.DataFrame) -> list[tuple[list[str], str]]:
    """``--pair CONFIG=BASELINE`` values as [(the machines CONFIG matches, BASELINE's machine)]: each
    side a glob on machine labels (or configurations); a pair that matches nothing is an error that
    lists what there is."""
    from fnmatch import fnmatchcase

    labels = list(dict.fromkeys(facts["machine"].astype(str)))
    by_config = dict(zip(facts["config"].astype(str), facts["machine"].astype(str), strict=True))
    out = []
    for text in pairs:
        config, equals, base = (part.strip() for part in text.partition("="))
        if not equals or not config or not base:
            raise CCBenchError(f"--pair {text!r}: give CONFIG=BASELINE (globs on machine labels), e.g. 'TDX*=Intel-*'")

        def matching(pattern: str) -> list[str]:
            found = [m for m in labels if fnmatchcase(m.lower(), pattern.lower())]
            found += [m for c, m in by_config.items() if fnmatchcase(c.lower(), pattern.lower()) and m not in found]
            return found

        configs, bases = matching(config), matching(base)
        for side, found in (("CONFIG", configs), ("BASELINE", bases)):
            if not found:
                raise CCBenchError(f"--pair {text!r}: {side} matches no machine; the machines are: {'; '.join(labels)}")
        if len(bases) > 1:
            raise CCBenchError(f"--pair {text!r}: BASELINE matches several machines ({'; '.join(bases)}); give one")
        out.append(([m for m in configs if m != bases[0]], bases[0]))
    return out


def machine_vendors(facts: pd.DataFrame, machines: dict[str, dict[str, Any]]) -> dict[str, tuple[str | None, str]]:
    """{machine label: (its CPU vendor, what says so)} (ccbench.probe.facts.cpu_vendor: the CPU model,
    else the TEE's vendor, else a vendor its label names)."""
    from ccbench.probe.facts import cpu_vendor, machine_facts

    rows = facts.drop_duplicates("machine")
    return {
        str(row.machine): cpu_vendor(
            machine_facts(machines.get(str(row.bundle))).get("CPU model"), str(row.tee), str(row.machine)
        )
        for row in rows.itertuples(index=False)
    }


def _workloads_of(engine: SampleSet, facts: pd.DataFrame) -> dict[str, set[str]]:
    """{machine label: the workloads it measured}."""
    if facts.empty:
        return {}
    series = measured_series(engine)
    machine_of = dict(zip(facts["config"].astype(str), facts["machine"].astype(str), strict=True))
    out: dict[str, set[str]] = {}
    for workload, config in zip(series["workload"].astype(str), series["config"].astype(str), strict=True):
        out.setdefault(machine_of.get(config, ""), set()).add(workload)
    return out


def matched_pairs(
    facts: pd.DataFrame, machines: dict[str, dict[str, Any]], workloads: dict[str, set[str]] | None = None
) -> list[tuple[list[str], str]]:
    """The default matched baselines: each machine with a TEE against a machine without one whose CPU
    model is the same, else whose CPU vendor is the same (machine_vendors: a TDX guest's CPU is an Intel
    one even where its model is unknown), else one whose vendor nothing says, the first such in load
    order; never one of another known vendor (cross_vendor_rows leaves such rows out). Of several such,
    one that measured a workload the TEE machine measured (``workloads``: {machine: workloads}) before
    one that shares none. [] where no TEE machine has one (then one baseline for all, as before)."""
    from ccbench.probe.facts import machine_facts

    rows = facts.drop_duplicates("machine")
    cpu = {
        str(row.machine): machine_facts(machines.get(str(row.bundle))).get("CPU model")
        for row in rows.itertuples(index=False)
    }
    vendor = {machine: found for machine, (found, _basis) in machine_vendors(facts, machines).items()}
    tee = dict(zip(rows["machine"].astype(str), rows["tee"].astype(object), strict=True))
    plain = [m for m, t in tee.items() if t in ("none", None)]
    found: dict[str, list[str]] = {}
    for machine, technology in tee.items():
        if technology in ("none", None):
            continue
        same = [p for p in plain if cpu.get(machine) and cpu.get(p) == cpu[machine]]
        same = same or [p for p in plain if vendor.get(machine) and vendor.get(p) == vendor[machine]]
        # a plain machine whose vendor nothing says stands in only where no plain machine has a known one
        same = same or [p for p in plain if vendor.get(p) is None and vendor.get(machine) is not None]
        if same and workloads:
            # stable: load order among the plain machines that share as many workloads with it
            same = sorted(same, key=lambda p: -len(workloads.get(p, set()) & workloads.get(machine, set())))
        if same:
            found.setdefault(same[0], []).append(machine)
    return [(configs, base) for base, configs in found.items()]


#: the reason a row that sets a TEE machine against a machine of another CPU vendor is left out
ACROSS_VENDORS = "across CPU vendors"


def cross_vendor_rows(table: pd.DataFrame, facts: pd.DataFrame, machines: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """``table`` with each row that sets a machine with a TEE against a machine without one whose CPU vendor
    is known to differ (a TDX guest, an Intel CPU, against an AMD machine) marked implausible: the
    difference is the CPUs' as much as the TEE's, so the verdict leaves it out and says why, in place of a
    figure. Rows the user paired with --pair are theirs and not marked."""
    if table.empty:
        return table
    vendors = machine_vendors(facts, machines)
    machine_of = dict(zip(facts["config"].astype(str), facts["machine"].astype(str), strict=True))
    tee_of = dict(zip(facts["machine"].astype(str), facts["tee"].astype(object), strict=True))
    reasons = []
    for base, config in zip(table["baseline"].astype(str), table["config"].astype(str), strict=True):
        machine, against = machine_of.get(config), machine_of.get(base)
        (mine, my_basis), (theirs, their_basis) = vendors.get(machine, (None, "")), vendors.get(against, (None, ""))
        crosses = (
            tee_of.get(machine) not in ("none", None)
            and tee_of.get(against) in ("none", None)
            and mine is not None
            and theirs is not None
            and mine != theirs
        )
        reasons.append(
            f"{ACROSS_VENDORS}: {mine} ({my_basis}) against {theirs} ({their_basis}); add a machine without a TEE "
            f"with an {mine} CPU, or name the pair with --pair"
            if crosses
            else ""
        )
    if not any(reasons):
        return table
    table = table.copy()
    old = table["implausible"].fillna("").astype(str) if "implausible" in table else pd.Series([""] * len(table))
    table["implausible"] = [mark or before for mark, before in zip(reasons, old, strict=True)]
    table["flags"] = [
        [*flags, "implausible"] if mark and "implausible" not in flags else flags
        for flags, mark in zip(table["flags"], reasons, strict=True)
    ]
    return table


def _paired(facts: pd.DataFrame, pairs, against, rest_baseline: str | None) -> pd.DataFrame:
    """The rows of each pair's machines against its baseline (one comparison per baseline); with
    ``rest_baseline`` the machines no pair names against that one, as without pairs."""
    machine_of = dict(zip(facts["config"].astype(str), facts["machine"].astype(str), strict=True))
    tables, named = [], set()
    for configs, base in pairs:
        table = against(resolve_baseline(facts, base))
        wanted = set(configs)
        keep = table["config"].map(lambda c, wanted=wanted: machine_of.get(str(c)) in wanted)
        tables.append(table[keep.to_numpy(dtype=bool)])
        named |= set(configs)
    if rest_baseline is not None:
        table = against(rest_baseline)
        keep = table["config"].map(lambda c: machine_of.get(str(c)) not in named)
        tables.append(table[keep.to_numpy(dtype=bool)])
    tables = [t for t in tables if not t.empty]
    if not tables:
        return against(resolve_baseline(facts, pairs[0][1])).iloc[0:0]
    return pd.concat(tables, ignore_index=True)


def _with_own_layers(facts: pd.DataFrame, table: pd.DataFrame, against) -> pd.DataFrame:
    """``table`` and, for each machine (or run) that measured several configurations but whose least
    protected one is no row's baseline, its configurations against that one: its own layers (TLS on
    the SEV-SNP guest beside TLS on its twin, whose rows against the twin's baseline are "combined"),
    after the table's rows. A machine with one configuration adds nothing."""
    if table.empty:
        return table
    machine_of = dict(zip(facts["config"].astype(str), facts["machine"].astype(str), strict=True))
    pairs = set(zip(table["baseline"].astype(str), table["config"].astype(str)))
    baselines = {b for b, _ in pairs}
    added = []
    for machine in dict.fromkeys(machine_of.values()):
        configs = [c for c, m in machine_of.items() if m == machine]
        own = least_protected(facts, configs) if len(configs) > 1 else None
        # a machine whose rows already stand against one of its own configurations (the baseline chosen
        # on it, --baseline tmpfs) has its layers: against its least protected one too would say each twice
        if own is None or any(machine_of.get(b) == machine for b in baselines):
            continue
        rows = against(own)
        # its own configurations' rows that the table does not hold yet (a cipher against its loop twin may)
        keep = [
            machine_of.get(b) == machine == machine_of.get(c) and (b, c) not in pairs
            for b, c in zip(rows["baseline"].astype(str), rows["config"].astype(str))
        ]
        added.append(rows[np.asarray(keep, dtype=bool)])
    added = [rows for rows in added if not rows.empty]
    return pd.concat([table, *added], ignore_index=True) if added else table


def _with_tee_twins(facts: pd.DataFrame, table: pd.DataFrame, against) -> pd.DataFrame:
    """``table`` and, where several machines share one TEE (seed 000's TDX VM with an encrypted disk and
    its twin without), the more protected ones against the least protected of them: what the other layer
    (the disk's encryption) costs inside that TEE, which their rows against a plain machine can only give
    combined with the TEE's. Rows the table holds already are not repeated."""
    if table.empty or "tee" not in facts:
        return table
    machine_of = dict(zip(facts["config"].astype(str), facts["machine"].astype(str), strict=True))
    tee_of = dict(zip(facts["config"].astype(str), facts["tee"].astype(object), strict=True))
    pairs = set(zip(table["baseline"].astype(str), table["config"].astype(str)))
    added = []
    for tee in dict.fromkeys(t for t in tee_of.values() if t not in ("none", None)):
        configs = [c for c, t in tee_of.items() if t == tee]
        if len({machine_of[c] for c in configs}) < 2:
            continue
        own = least_protected(facts, configs)
        rows = against(own)
        keep = [
            machine_of.get(c) != machine_of.get(own) and tee_of.get(c) == tee and b == own and (b, c) not in pairs
            for b, c in zip(rows["baseline"].astype(str), rows["config"].astype(str))
        ]
        rows = rows[np.asarray(keep, dtype=bool)]
        # only where a protection layer differs: two machines with the same protections are replicas' business
        added.append(rows[rows["layer"] != "none"])
    added = [rows for rows in added if not rows.empty]
    return pd.concat([table, *added], ignore_index=True) if added else table


def _in_order(engine: SampleSet, first: str) -> pd.DataFrame:
    """The configurations' facts that have measured samples, in order of their first one."""
    facts = engine.facts[np.isfinite(engine.facts[first].to_numpy(dtype=float))]
    return facts.sort_values(first, kind="stable").reset_index(drop=True)


def _lint_rows(engine: SampleSet) -> pd.DataFrame:
    """What the lint reads of the samples without a per-sample frame: one row of facts per
    configuration and bundle (the machines compared) and every sample of the metrics its cipher-speed
    check reads (throughputs and the AEAD ceiling)."""
    # without a cipher speed measured (no transport ceiling among the metrics, no storage one among
    # the facts) the check has nothing to hold a throughput against: the first row of each bundle and
    # configuration stands for the rest (the machines compared, in the same order)
    ceiling = any(group[3] == TRANSPORT_CEILING for group in engine.groups) or bool(
        STORAGE_CEILING in engine.facts and engine.facts[STORAGE_CEILING].notna().any()
    )
    rows = engine.measured_frame(lambda group: group[3] in (THROUGHPUT, TRANSPORT_CEILING), firsts=not ceiling)
    facts = engine.facts.drop(columns=["first", "first_quiet"]).assign(metric=None, value=np.nan, warmup=False)
    return pd.concat([rows, facts], ignore_index=True)
