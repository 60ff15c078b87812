"""The verdict per protection layer: what each layer costs, where it hurts most, and why.

Built from the comparison table (ccbench.analysis.compare), never from numbers of its own, so the
report's verdict, ``ccbench compare --summary`` and the comparison rows always agree. Each
comparison row is attributed to the layer that differs between its configuration and its baseline
(``layer`` column); rows where several layers differ are summarised as "combined", rows where none
does (another machine or run with the same protections) as "no layer".

Cost is time-equivalent (a throughput ratio of 0.8 is +25%). The typical cost of a layer is the
geometric mean over workloads of each workload's geometric mean over its rows (cases, metrics); its
95% interval is a t interval on the logs between workloads (three or more workloads), or between a
single workload's rows, or, for one row, that row's own interval (noise within configurations).
With two workloads no interval is given (a t interval on two values spans nearly everything): the
range between them is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis import format as fmt
from ccbench.analysis import headline, impact, pairing, semantics
from ccbench.analysis.causes import causes_of
from ccbench.analysis.replicas import BETWEEN_MACHINES, RUNS_ONLY, SAME_MACHINES
from ccbench.analysis.stats import CONFIDENCE, SKEWED

# the verdict's text cells (the report's table, compare --details) and its count of contended
# executions live in their own module; their names are this one's too, as before

#: order of the layers in the verdict (by the start of the layer label)
LAYER_ORDER = [
    "TEE",
    "storage encryption",
    "in-memory storage",
    "loop file, no cipher",
    "TLS",
    "secure channel",
    "transport",
    "storage removed",
    "transport removed",
    "TEE removed",
    "mechanism twin",
    "combined",
    "none",
]


@dataclass
class LayerVerdict:
    layer: str
    #: time-equivalent ratio (> 1 = costs time) and its interval
    typical: float
    low: float
    high: float
    #: what the interval spans: "between workloads (3)", "between cases (4)", "within configurations"
    interval_over: str
    #: the smallest and largest per-workload cost (time-equivalent ratios)
    range_low: float
    range_high: float
    workloads: int
    comparisons: int
    significant: int
    contended: int
    noisy: int
    not_significant: int
    #: the worst row: "fio 4k randread throughput (MB/s) on cvm / SEV-SNP / disk: +9.1%, ratio 0.917 [0.90, 0.93]"
    worst: str
    worst_overhead: float
    causes: list[str] = field(default_factory=list)
    #: machines behind each side ("3 vs 3", "1 vs 1", "2 (same on both sides)") and what that means
    #: for the interval (machine_note)
    machines: str = "-"
    machines_note: str = ""
    #: what the machines behind the comparisons differ in besides the layer ("CPU model (Ice Lake vs
    #: Sapphire Rapids)"), from the rows' "confounded by" flags (ccbench.analysis.lint), and how many rows
    confounded: list[str] = field(default_factory=list)
    confounded_rows: int = 0
    #: what the typical cost rests on: "application metrics: notebook total_s; fio throughput"
    rests_on: str = ""
    #: the layer's comparisons left out of the typical cost (per-message and supporting metrics)
    not_counted: int = 0
    #: of its significant rows, how many are plausible supporting metrics (not counted in the figure)
    supporting_significant: int = 0
    #: of its significant rows, how many compare flags skewed (the medians move the other way)
    skewed: int = 0
    #: per protected configuration of a per-message benchmark: the share of one unit of application
    #: work it adds and its floors (ccbench.analysis.impact.message_cost)
    message_costs: list[dict] = field(default_factory=list)
    #: the median minimum detectable effect (a fraction) of the comparisons the typical cost rests on
    mde: float = math.nan
    #: per workload of those comparisons, its own cost (ccbench.analysis.headline.WorkloadCost)
    workload_costs: list = field(default_factory=list)
    #: what may be said of the layer (ccbench.analysis.semantics), and of each of its workloads
    judgement: semantics.Judgement | None = None
    workload_judgements: list[tuple[str, semantics.Judgement]] = field(default_factory=list)
    #: the machines behind its two sides differ in CPU ("machines differ in CPU") or a side's CPU is
    #: not recorded ("CPU unknown"): said in the headline line
    cpu_note: str = ""
    #: the rows left out as implausible: (names, reason, configuration)
    left_out_parts: list[tuple[str, str, str]] = field(default_factory=list)
    #: how many of the layer's rows were left out (implausible, across CPU vendors): in no count above
    left_out_rows: int = 0
    #: what the layer's rows stand against where it is not the baseline (a cipher on a loop file:
    #: ext4-loop; ccbench.analysis.pairing)
    against: str = ""

    @property
    def overhead(self) -> float:
        return (self.typical - 1) * 100

    @property
    def distinguishable(self) -> bool:
        """Whether the layer shows a difference: a significant comparison, or a difference pooled
        across benchmarks of one value each (ccbench.analysis.semantics)."""
        if self.judgement is not None:
            return self.judgement.holds_significant
        if not self.significant:
            return False
        return math.isnan(self.low) or not (self.low <= 1.0 <= self.high)

    def words(self) -> str:
        """What the layer costs in the one convention ("2.9x slower [2.6x, 3.3x]", "1m randread 340x
        slower ... 4k randwrite 2.9x faster", "no cost above 4.1% ..."), the same in every output."""
        if self.judgement is None or self._per_message_only():
            return self.typical_text()
        return self.judgement.phrase()

    def left_out_text(self, short: bool = False) -> str:
        """ "left out: fio 4k randwrite on x (faster than tmpfs)" for the implausible rows, or "";
        ``short``: the reasons first, "left out (faster than tmpfs): fio 4k randwrite", every row
        named once (the headline's form, at every width)."""
        if self.judgement is None or not self.judgement.left_out:
            return ""
        if short and self.left_out_parts:
            reasons = list(dict.fromkeys(reason for _, reason, _ in self.left_out_parts))
            names = list(dict.fromkeys(names for names, _, _ in self.left_out_parts))
            return f"left out ({'; '.join(reasons)}): {'; '.join(names)}"
        shown = self.judgement.left_out
        more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
        return f"left out: {'; '.join(shown[:3])}{more}"

    def sentence(self) -> str:
        """What to take from this layer, in one sentence."""
        if self.confounded and self.layer != "none":
            return confounded_sentence(self)
        name = "No protection layer differs (another machine or run)" if self.layer == "none" else self.layer
        where = f"{self.workloads} workload{'s' if self.workloads != 1 else ''}"
        spread = (
            f"; between workloads {fmt.percent((self.range_low - 1) * 100)} to "
            f"{fmt.percent((self.range_high - 1) * 100)}"
            if self.workloads > 1
            else ""
        )
        interval = f"95% interval {self.interval_text()}, {self.interval_over}" if not math.isnan(self.low) else ""
        detail = "; ".join(p for p in (interval, spread.lstrip("; ")) if p)
        head = self._per_message_head(name)
        if head is None:
            head = self._head(name, where, detail)
        if not self._per_message_only():
            head += self._rests_on_text()
        head += self._message_costs_text()
        return head + self._tail() + "."

    def _head(self, name: str, where: str, detail: str) -> str:
        """The sentence's head: the typical cost, or that it is not distinguishable from noise."""
        if self.layer == "none":
            # an A/A comparison: any difference is the machines' or the runs', not a protection's
            head = f"Configurations with the same protections (another machine or run){self._cpu_text()}: " + (
                self.judgement_sentence(where) if self.judgement is not None else "-"
            )
            if self.distinguishable:
                head += ": that difference is not caused by any protection layer"
        else:
            head = f"{name}{self._cpu_text()}: {self.judgement_sentence(where)}"
        return head

    def _cpu_text(self) -> str:
        return f" ({self.cpu_note})" if self.cpu_note else ""

    def judgement_sentence(self, where: str) -> str:
        """The layer's judgement with its counts, the test behind it and, where the workloads differ,
        each workload's own words; then the rows left out as implausible."""
        j = self.judgement
        if j.kind == semantics.LEFT_OUT:
            return f"{j.phrase()}; {self.left_out_text()}"
        counts = f"{self.significant} of {self.comparisons} comparisons significant across {where}"
        test = j.test_named()
        text = f"{j.phrase()} ({counts})"
        if j.kind == semantics.POOLED and not j.only_in:
            text += f"; one figure: the rows agree in direction and are not heterogeneous ({test or 'one row'})"
        elif j.kind in (semantics.SIZES, semantics.DISAGREE):
            why = "of both directions" if j.kind == semantics.DISAGREE else "of one direction but different sizes"
            text += f"; no pooled figure: the differences are {why}{' (' + test + ')' if test else ''}"
        elif j.kind in (semantics.ACROSS, semantics.UNCLEAR):
            text += f"; pooled across benchmarks of one value each ({test}; interval from their spread)"
        if len(self.workload_judgements) > 1:
            shows = [(w, wj) for w, wj in self.workload_judgements if wj.holds_significant]
            rest = len(self.workload_judgements) - len(shows)
            parts = [f"{w} {wj.phrase()}" for w, wj in shows]
            if rest and shows:
                parts.append(f"none significant in the other {rest}")
            if len(shows) > 1:
                text += "; per workload: " + "; ".join(parts)
        left = self.left_out_text()
        if left:
            text += f"; {left}"
        return text

    def _tail(self) -> str:
        """Where it hurts most, what served the layer, contention and the machines behind each side."""
        tail = (
            f"; it costs most on {self.worst}"
            if self.worst and self.worst_overhead > 0 and self.layer != "none"
            else ""
        )
        # what served the layer (a software-only cipher is the likely cause of a storage or transport cost)
        served = [c for c in self.causes if "contended" not in c and not c.startswith("measured across machines")]
        if served:
            tail += "; " + "; ".join(served)
        elif any(c.startswith("measured across machines") for c in self.causes):
            tail += "; measured across machines, so it includes their other differences"
        if self.skewed:
            rows = "comparison" if self.skewed == 1 else "comparisons"
            tail += f"; {self.skewed} significant {rows} skewed: the medians move the other way, a few executions carry the difference"
        if self.contended:
            tail += f"; {self.contended} of {self.comparisons} comparisons include contended executions"
        if self.machines_note:
            tail += "; " + self.machines_note
        return tail

    def _per_message_only(self) -> bool:
        """Whether no comparison of an application metric stands behind the typical cost."""
        if self.judgement is not None and self.judgement.kind == semantics.LEFT_OUT:
            return False  # every row left out: nothing stands behind it, per message or otherwise
        return self.not_counted >= self.comparisons

    def _per_message_head(self, name: str) -> str | None:
        """The sentence's head where the layer has only per-message comparisons: the share of one unit
        of application work it adds, or that no application-level cost was measured."""
        if not self._per_message_only():
            return None
        counts = f"{self.significant} of {self.comparisons} per-message comparisons significant: see the table"
        if math.isnan(self.typical):
            return f"{name}: no application-level cost measured ({counts})"
        if len(self.message_costs) == 1:
            return f"{name} adds {impact.share_phrase(self.message_costs[0])} ({counts})"
        application = self.message_costs[0]["application"]
        return (
            f"{name} adds about {impact.share_text(self.typical - 1)} to {application} per request that opens its "
            f"connection, the median over {len(self.message_costs)} configurations ({counts})"
        )

    def _rests_on_text(self) -> str:
        if not self.rests_on:
            return ""
        left_out = (
            f"; {self.not_counted} other comparison{'s' if self.not_counted != 1 else ''} (per-message and "
            "supporting metrics) not counted"
            if self.not_counted
            else ""
        )
        return f"; it rests on {self.rests_on}{left_out}"

    def _message_costs_text(self) -> str:
        """Per protected configuration of a per-message benchmark: the share of one unit of application
        work it adds (unless the head said it), then its figures against floors measured in the same run."""
        alone = self._per_message_only() and len(self.message_costs) == 1
        parts = []
        for cost in self.message_costs:
            where = "" if alone else f" on {cost['config']}"
            share = impact.share_phrase(cost)
            if share and not alone:
                parts.append(f"per request of {cost['workload']}{where} it adds {share}")
            floors = impact.floors_sentence(cost)
            if floors:
                parts.append(f"per message{where}, against floors measured in the same run: {floors}")
        return "".join(f"; {part}" for part in parts)

    def typical_text(self) -> str:
        """The typical cost as the table prints it; a share of an application's work (often far below
        a percent) with two significant digits."""
        if self._per_message_only() and not math.isnan(self.typical):
            return f"+{impact.share_text(self.typical - 1)}"
        return fmt.effect(self.typical)

    def interval_text(self) -> str:
        if math.isnan(self.low):
            return "-"
        return f"{fmt.effect(self.low)} to {fmt.effect(self.high)}"


def _time_equivalent(comparison: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    higher = (comparison["better"] == "higher").to_numpy()
    ratio = comparison["ratio"].to_numpy(dtype=float)
    low, high = comparison["ci_low"].to_numpy(dtype=float), comparison["ci_high"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.where(higher, 1 / ratio, ratio), np.where(higher, 1 / high, low), np.where(higher, 1 / low, high))


def t_interval(logs: np.ndarray) -> tuple[float, float, float]:
    """The geometric mean of ratios given as logs, with a t interval from their spread (nan with one)."""
    mean = float(logs.mean())
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    se = float(logs.std(ddof=1)) / math.sqrt(len(logs))
    t = float(special.stdtrit(len(logs) - 1, 0.5 + CONFIDENCE / 2))
    return math.exp(mean), math.exp(mean - t * se), math.exp(mean + t * se)


def layer_rank(layer: str) -> tuple[int, str]:
    """Where a layer stands in the verdict's order (LAYER_ORDER, by the start of its label); the
    report's charts order their panels by it too."""
    layer = str(layer)
    for index, prefix in enumerate(LAYER_ORDER):
        if layer.startswith(prefix):
            return index, layer
    return len(LAYER_ORDER), layer


def verdicts(
    comparison: pd.DataFrame | None, samples: pd.DataFrame | None = None, machines: dict | None = None
) -> list[LayerVerdict]:
    """One LayerVerdict per layer found in the comparison, in LAYER_ORDER. ``machines`` ({bundle:
    probe}) lets a layer measured across machines of different or unknown CPUs say so."""
    if comparison is None or comparison.empty or "layer" not in comparison:
        return []
    data = comparison.copy()
    data["te"], data["te_low"], data["te_high"] = _time_equivalent(data)
    # which rows are an application's result (each workload's declared primary metrics)
    declared = impact.declarations(samples)
    data["primary"] = impact.primary_mask(data, declared)
    data["per_message"] = data["workload"].map(lambda w: bool((declared.get(w) or impact.Declared(None)).message_costs))
    # the few distinct (configuration, machine, cipher) facts, found once instead of once per layer
    facts = None
    if samples is not None and not samples.empty:
        from ccbench.analysis.load import CAUSE_KEYS

        columns = ["config", "machine"] + [c for c in CAUSE_KEYS if c in samples]
        facts = samples[columns].drop_duplicates()
    out = []
    for layer in sorted(set(data["layer"]), key=layer_rank):
        rows = data[data["layer"] == layer]
        # rows the plausibility lint marked are named, never counted (ccbench.analysis.semantics)
        usable = rows[np.isfinite(rows["te"]) & (rows["te"] > 0) & ~semantics.implausible_mask(rows)]
        if usable.empty:
            if semantics.implausible_mask(rows).any():
                out.append(_all_left_out(layer, rows))
            continue
        costs = impact.message_costs(rows, samples, declared)
        counted, basis = _counted_rows(usable)
        if counted.empty:
            per_workload, typical, low, high, over = _per_message_typical(costs)
            worst, worst_overhead = _largest_share(costs)
        else:
            per_workload, typical, low, high, over = _typical(counted)
            worst, worst_overhead = _worst(counted)
        # judged on the few columns it reads (a fleet's thousands of rows, hundreds of workloads)
        narrow = counted[[c for c in semantics.COLUMNS if c in counted]]
        parts = [(str(w), semantics.judge(r)) for w, r in narrow.groupby("workload", sort=False)]
        judgement = semantics.combine(parts) if parts else None
        if judgement is not None:
            judgement.left_out = semantics.left_out(rows)
            left_parts = semantics.left_out_parts(rows)
            if not counted.empty:
                # a figure only where one may be given (ccbench.analysis.semantics)
                given = judgement.kind in (semantics.POOLED, semantics.ACROSS)
                typical = judgement.typical if given else math.nan
                low, high = (judgement.low, judgement.high) if given else (math.nan, math.nan)
                over = judgement.test_named() or over if given else "-"
        # the counts are of the rows the verdict judged: a row left out is named, never counted
        kept = rows[~semantics.implausible_mask(rows)]
        flags = kept["flags"]
        confounded, confounded_rows = confounding(flags)
        causes, contended = _causes(layer, kept if not kept.empty else rows, facts)
        out.append(
            LayerVerdict(
                layer=layer,
                typical=typical,
                low=low,
                high=high,
                interval_over=over,
                range_low=float(per_workload.min()) if len(per_workload) else math.nan,
                range_high=float(per_workload.max()) if len(per_workload) else math.nan,
                workloads=len(per_workload),
                comparisons=len(kept),
                significant=int(kept["significant"].astype(bool).sum()),
                contended=contended,
                noisy=int(flags.map(lambda f: "noisy" in f).sum()),
                not_significant=int((~kept["significant"].astype(bool)).sum()),
                skewed=int(flags.map(lambda f: SKEWED in f).sum()),
                worst=worst,
                worst_overhead=worst_overhead,
                causes=causes,
                **machines_behind(rows),
                confounded=confounded,
                confounded_rows=confounded_rows,
                rests_on=basis,
                not_counted=len(kept) - len(counted),
                left_out_rows=len(rows) - len(kept),
                supporting_significant=int(usable["significant"].astype(bool).sum())
                - int(counted["significant"].astype(bool).sum()),
                message_costs=costs,
                mde=headline.median_mde(counted),
                workload_costs=headline.workload_costs(counted) if not counted.empty else [],
                judgement=judgement if not counted.empty else None,
                workload_judgements=parts,
                cpu_note=cpu_note(rows, samples, machines) if layer != "none" or machines else "",
                left_out_parts=left_parts if judgement is not None else [],
                against=pairing.twin_baseline(rows) if layer.startswith("storage encryption") else "",
            )
        )
    return out


def cpu_note(rows: pd.DataFrame, samples: pd.DataFrame | None, machines: dict | None) -> str:
    """ "machines differ in CPU" where a row's sides ran on different CPU models (its "confounded by
    CPU model" flag, or the probes), "CPU unknown" where a side's machine records none; "" else."""
    if rows["flags"].map(lambda flags: any(f.startswith(CONFOUNDED + "CPU model") for f in flags)).any():
        return "machines differ in CPU"
    if not machines or samples is None or samples.empty or "bundle" not in samples:
        return ""
    from ccbench.analysis.lint import config_sides, differences

    sides = config_sides(samples, machines)
    for base, config in rows[["baseline", "config"]].drop_duplicates().itertuples(index=False):
        a, b = sides.get(base, []), sides.get(config, [])
        if {label for label, _ in a} == {label for label, _ in b}:
            continue  # the same machines on both sides
        found, unknown = differences(a, b)
        if any(d.fact == "CPU model" for d in found):
            return "machines differ in CPU"
        if "CPU model" in unknown:
            return "CPU unknown"
    return ""


def _all_left_out(layer: str, rows: pd.DataFrame) -> LayerVerdict:
    """A layer whose every comparison the plausibility lint marked: no figure, the rows named."""
    judgement = semantics.Judgement(kind=semantics.LEFT_OUT, left_out=semantics.left_out(rows))
    judgement.left_count = len(rows)
    return LayerVerdict(
        layer=layer,
        typical=math.nan,
        low=math.nan,
        high=math.nan,
        interval_over="-",
        range_low=math.nan,
        range_high=math.nan,
        workloads=rows["workload"].nunique(),
        comparisons=0,
        significant=0,
        contended=int(rows["flags"].map(lambda f: "contended" in f).sum()),
        noisy=0,
        not_significant=0,
        left_out_rows=len(rows),
        worst="",
        worst_overhead=0.0,
        judgement=judgement,
        left_out_parts=semantics.left_out_parts(rows),
    )


def _count_range(values: pd.Series) -> str:
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"


def machines_behind(rows: pd.DataFrame) -> dict[str, str]:
    """How many machines stood behind each side of a layer's comparisons (``machines``) and what the
    interval can then say (``machines_note``): with replicas it includes the spread between machines;
    with one machine a side it covers run-to-run noise only."""
    if "interval_from" not in rows or rows.empty:
        return {}
    kinds = rows["interval_from"]
    across = rows[kinds != SAME_MACHINES]
    if across.empty:
        count = _count_range(rows["machines"])
        which = "machine" if count == "1" else f"{count} machines"
        return {
            "machines": f"{count} (same on both sides)",
            "machines_note": f"both sides measured on the same {which}",
        }
    cell = f"{_count_range(across['machines_baseline'])} vs {_count_range(across['machines'])}"
    between = across[across["interval_from"] == BETWEEN_MACHINES]
    single = int((across["interval_from"] == RUNS_ONLY).sum())
    if between.empty:
        note = (
            "one machine per side: the interval covers run-to-run noise only and cannot separate the layer from "
            "machine-to-machine variation (replicate: give several machines of each configuration the same label)"
        )
        return {"machines": cell, "machines_note": note}
    note = (
        f"{_count_range(between['machines_baseline'])} machines against {_count_range(between['machines'])}: "
        "the interval includes the spread between machines"
    )
    if (between[["machines_baseline", "machines"]].min(axis=1) == 1).any():
        note += " (a side with one machine is taken to vary as much as the other side's machines)"
    if single:
        note += f"; {single} of {len(across)} comparisons had one machine a side (run-to-run noise only)"
    return {"machines": cell, "machines_note": note}


CONFOUNDED = "confounded by "


def confounding(flags: pd.Series) -> tuple[list[str], int]:
    """(the distinct "<what>" of the rows' "confounded by <what>" flags, how many rows have one)."""
    found = [f[len(CONFOUNDED) :] for row in flags for f in row if f.startswith(CONFOUNDED)]
    rows = int(flags.map(lambda row: any(f.startswith(CONFOUNDED) for f in row)).sum())
    return list(dict.fromkeys(found)), rows


def confounded_sentence(item: LayerVerdict) -> str:
    """A layer measured only across machines that differ in more than the layer: the difference is
    named with what confounds it, and no interval is offered as the layer's own cost."""
    what = "; ".join(item.confounded)
    rows = f"{item.comparisons} comparison{'s' if item.comparisons != 1 else ''}"
    share = "all confounded" if item.confounded_rows == item.comparisons else f"{item.confounded_rows} confounded"
    where = f"{item.workloads} workload{'s' if item.workloads != 1 else ''}"
    measured = item.judgement.phrase() if item.judgement is not None else fmt.effect(item.typical)
    return (
        f"{item.layer}: cost confounded by {what}: what was measured across {where} ({rows}, {share}: "
        f"{measured}) is the difference between the machines as a whole, not the layer's own; "
        "compare machines that differ only in the layer to measure it."
    )


def _counted_rows(usable: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows a layer's typical cost is taken from, and what it rests on: the workloads' primary
    (application-level) metrics; where the layer has none, the metrics of workloads that are no
    per-message benchmark (an import, a kind whose declared metrics were not compared), said as such;
    never a per-message benchmark's round trips and handshakes (its share of an application's work
    leads instead: ccbench.analysis.impact)."""
    primary = usable[usable["primary"]]
    if not primary.empty:
        return primary, f"application metrics: {impact.rests_on(primary)}"
    other = usable[~usable["per_message"]]
    if not other.empty:
        return other, f"metrics not declared as an application's result: {impact.rests_on(other)}"
    return usable.iloc[0:0], "per-message costs only (no application metric compared)"


def _per_message_typical(costs: list[dict]) -> tuple[pd.Series, float, float, float, str]:
    """Where a layer has per-message comparisons only: the share of one unit of application work a
    request that opens its connection adds (time-equivalent: 1 + share), per workload and typical
    (medians over the protected configurations); no interval (a difference of medians)."""
    shares = pd.DataFrame(
        [(c["workload"], 1 + c["share_new_connection"]) for c in costs if c["share_new_connection"] is not None],
        columns=["workload", "te"],
    )
    if shares.empty:
        return pd.Series(dtype=float), math.nan, math.nan, math.nan, "-"
    per_workload = shares.groupby("workload", sort=False)["te"].median()
    over = "share of one unit of application work, from medians: no interval"
    return per_workload, float(shares["te"].median()), math.nan, math.nan, over


def _largest_share(costs: list[dict]) -> tuple[str, float]:
    """The protected configuration whose requests add the largest share of the application's work."""
    known = [c for c in costs if c["share_new_connection"] is not None]
    if len(known) < 2:  # one configuration: the sentence's head already says it
        return "", 0.0
    top = max(known, key=lambda c: c["share_new_connection"])
    share = top["share_new_connection"]
    return (
        f"{top['application']} per request that opens its connection on {top['config']}: +{impact.share_text(share)}",
        share * 100,
    )


def _typical(usable: pd.DataFrame) -> tuple[pd.Series, float, float, float, str]:
    """Per workload the geometric mean of its rows; the typical cost with its interval, and what the
    interval spans."""
    per_workload = usable.groupby("workload", sort=False)["te"].agg(lambda v: float(np.exp(np.log(v).mean())))
    if len(per_workload) >= 3:
        typical, low, high = t_interval(np.log(per_workload.to_numpy()))
        over = f"spread between {len(per_workload)} workloads"
    elif len(per_workload) == 2:
        typical, low, high = t_interval(np.log(per_workload.to_numpy()))
        low = high = math.nan
        over = "two workloads: see the range between them"
    elif len(usable) >= 2:
        typical, low, high = t_interval(np.log(usable["te"].to_numpy()))
        over = f"spread between {len(usable)} cases and metrics of one workload"
    else:
        row = usable.iloc[0]
        typical, low, high = float(row["te"]), float(row["te_low"]), float(row["te_high"])
        over = (
            "spread between machines (one comparison)"
            if row.get("interval_from") == BETWEEN_MACHINES
            else "noise within the configurations (one comparison)"
        )
    return per_workload, typical, low, high, over


def _worst(usable: pd.DataFrame) -> tuple[str, float]:
    """The comparison that hurts most (the largest significant cost, else the largest), as the table prints it."""
    ranked = usable.sort_values("te", ascending=False, kind="stable")
    significant = ranked[ranked["significant"]]
    top = (significant if not significant.empty else ranked).iloc[0]
    worst = (
        f"{' '.join(p for p in (top['workload'], top['case'] if isinstance(top['case'], str) else '', top['metric']) if p)} on {top['config']}: "
        f"{fmt.row_effect(top)}, ratio {fmt.ratio_interval(top['ratio'], top['ci_low'], top['ci_high'])}"
        f"{'' if top['significant'] else ' (not significant)'}"
    )
    return worst, float(top["overhead_percent"])


def _causes(layer: str, rows: pd.DataFrame, facts: pd.DataFrame | None) -> tuple[list[str], int]:
    """The causes recorded for a layer's rows, and how many of them include contended executions."""
    causes = []
    if layer.startswith("TEE") or layer.startswith("combined"):
        pairs = rows[["baseline", "config"]].drop_duplicates()
        if facts is not None:
            machine = facts.drop_duplicates("config").set_index("config")["machine"]
            if any(machine.get(b) != machine.get(c) for b, c in pairs.itertuples(index=False)):
                causes.append("measured across machines: the cost includes any other difference between them")
    causes += causes_of(facts, set(rows["config"]), layer)
    if layer.startswith("storage encryption"):
        causes += [note for note in (pairing.loop_note(rows),) if note]
    contended = int(rows["flags"].map(lambda f: "contended" in f).sum())
    if contended:
        causes.append(
            f"{contended} of {len(rows)} comparisons include contended executions (others' CPU or steal "
            "time): compare again with --exclude-contended"
        )
    return causes, contended
