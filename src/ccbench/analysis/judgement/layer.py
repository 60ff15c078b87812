"""One protection layer's verdict (LayerVerdict): what it costs, over what, how sure, and its sentences
(the headline line, the judgement, the confounded machines); the order the layers are told in.
Built by ccbench.analysis.judgement.verdict from the comparison rows, rendered by every output."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import impact, semantics
from ccbench.analysis.judgement.wording import called_on_own

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
    #: Sapphire Rapids)"), from the rows' "confounded by" flags (ccbench.analysis.rows.sides), and how many rows
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
    #: work it adds and its floors (ccbench.analysis.judgement.impact.message_cost)
    message_costs: list[dict] = field(default_factory=list)
    #: the median minimum detectable effect (a fraction) of the comparisons the typical cost rests on
    mde: float = math.nan
    #: what may be said of the layer (ccbench.analysis.judgement.semantics), and of each of its workloads
    judgement: semantics.Judgement | None = None
    workload_judgements: list[tuple[str, semantics.Judgement]] = field(default_factory=list)
    #: the machines behind its two sides differ in CPU ("machines differ in CPU") or a side's CPU is
    #: not recorded ("CPU unknown"): said in the headline line
    cpu_note: str = ""
    #: the rows left out as implausible: (names, reason, configuration)
    left_out_parts: list[tuple[str, str, str]] = field(default_factory=list)
    #: how many of the layer's rows were left out (implausible, across CPU vendors): in no count above
    left_out_rows: int = 0
    #: how many of those left-out rows include contended executions (said apart from ``contended``)
    left_out_contended: int = 0
    #: whether no comparison of an application metric stands behind the figure (the counts are then
    #: of the per-message comparisons)
    per_message: bool = False
    #: what the layer's rows stand against where it is not the baseline (a cipher on a loop file:
    #: ext4-loop; ccbench.analysis.rows.pairing)
    against: str = ""

    @property
    def overhead(self) -> float:
        return (self.typical - 1) * 100

    @property
    def distinguishable(self) -> bool:
        """Whether the layer shows a difference: a significant comparison, or a difference pooled
        across benchmarks of one value each (ccbench.analysis.judgement.semantics)."""
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
            if len(reasons) == 1:
                return f"left out ({reasons[0]}): {'; '.join(names)}"
            # reasons that differ stay beside their rows: a list of five reasons before three groups of
            # rows could not be paired up (a user trial)
            grouped = dict.fromkeys(
                f"{names} ({reason.replace('; ', ' and ')})" for names, reason, _ in self.left_out_parts
            )
            return f"left out: {'; '.join(grouped)}"
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
        interval = f"95% interval {self.interval_text()}, {self.interval_over}" if self.states_interval() else ""
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
        if j.settled_on and not math.isnan(j.typical):
            # the run's settled headline: what it rests on, not a test of the rows it did not make
            text = f"{j.phrase()} ({j.settled_on}; {called_on_own(self.significant)})"
            left = self.left_out_text()
            return f"{text}; {left}" if left else text
        counts = f"{self.significant} of {self.comparisons} comparisons significant across {where}"
        if j.partial and not j.only_in:
            counts = f"across {where}"  # its words begin with the counts
        test = j.test_named()
        text = f"{j.phrase()} ({counts})"
        if j.partial:
            text += "; no figure for the whole: only some of its comparisons differ, named with their own"
        elif j.kind == semantics.POOLED and not j.only_in:
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
        if self.left_out_contended:
            tail += (
                f"; {self.left_out_contended} of the {self.left_out_rows} left-out comparisons include contended "
                "executions"
            )
        if self.machines_note:
            tail += "; " + self.machines_note
        return tail

    def _per_message_only(self) -> bool:
        """Whether no comparison of an application metric stands behind the typical cost."""
        if self.judgement is not None and self.judgement.kind == semantics.LEFT_OUT:
            return False  # every row left out: nothing stands behind it, per message or otherwise
        return self.per_message

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

    def states_interval(self) -> bool:
        """Whether the layer's words give one figure for the whole, so that its pooled interval may be
        shown beside them: a layer whose rows differ in size or direction, or where only some of them
        differ, has none, and a table cell must not give one its words deny (a user trial read
        "no figure for the whole" in compare and "9.1x faster to 3.3x faster" in --details)."""
        if math.isnan(self.low):
            return False
        j = self.judgement
        if j is None:
            return True
        return j.kind in (semantics.POOLED, semantics.ACROSS, semantics.UNCLEAR, semantics.NONE_SEEN) and not j.partial

    def interval_text(self) -> str:
        if not self.states_interval():
            return "-"
        if self.high < 1:  # wholly faster: the smaller gain first, as the brackets write it ("[1.01x, 59x]")
            return f"{fmt.effect(self.high)} to {fmt.effect(self.low)}"
        return f"{fmt.effect(self.low)} to {fmt.effect(self.high)}"


def layer_rank(layer: str) -> tuple[int, str]:
    """Where a layer stands in the verdict's order (LAYER_ORDER, by the start of its label); the
    report's charts order their panels by it too."""
    layer = str(layer)
    for index, prefix in enumerate(LAYER_ORDER):
        if layer.startswith(prefix):
            return index, layer
    return len(LAYER_ORDER), layer


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
