"""The verdict in one glance: one line per protection layer that fits 100 columns.

Each layer's line gives the typical cost with its interval, or "no cost above X% (the smallest this
comparison could see)" where no cost is distinguishable from noise (X: the median minimum detectable
effect of the comparisons it rests on, ccbench.analysis.stats.minimum_detectable_effect); what it
rests on; and the worst case. Where the layer's workloads disagree (a workload's significant cost
whose interval leaves out another workload's typical cost: costs of different sizes or signs), a
pooled interval would describe none of them, so the line says so and one line per workload follows.

Built from the comparison rows a layer's typical cost is taken from (ccbench.analysis.verdict), so
the lines never contradict the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ccbench.analysis import format as fmt

WIDTH = 100


@dataclass
class WorkloadCost:
    """One workload's part of a layer: its typical time-equivalent cost (> 1 = slower), the interval
    of its one comparison or the range of its several ones, how many were significant and in which
    directions, and the median smallest cost they could see."""

    workload: str
    typical: float
    low: float
    high: float
    significant: int
    comparisons: int
    mde: float
    worst: str
    #: the directions of its significant comparisons (True: slower)
    directions: frozenset = frozenset()

    @property
    def distinguishable(self) -> bool:
        """At least half its comparisons significant, all of them in one direction."""
        return self.significant * 2 >= self.comparisons > 0 and len(self.directions) == 1

    def as_dict(self) -> dict:
        """For ``compare --summary --json``: the fields, directions as a sorted list, distinguishable."""
        fields = {k: v for k, v in self.__dict__.items() if k != "directions"}
        return {**fields, "directions": sorted(self.directions), "distinguishable": self.distinguishable}

    def phrase(self) -> str:
        if not self.distinguishable:
            return cost_phrase(self.typical, self.low, self.high, False, self.mde)
        if self.comparisons == 1:
            return cost_phrase(self.typical, self.low, self.high, True, self.mde)
        return (
            f"{fmt.percent((self.typical - 1) * 100)} (cases {fmt.percent((self.low - 1) * 100)} to "
            f"{fmt.percent((self.high - 1) * 100)})"
        )


def median_mde(rows: pd.DataFrame) -> float:
    """The median minimum detectable effect (a fraction) of the rows that have one; NaN if none does."""
    if "mde" not in rows:
        return math.nan
    values = rows["mde"].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else math.nan


def workload_costs(counted: pd.DataFrame) -> list[WorkloadCost]:
    """Per workload of a layer's counted rows (with ``te``, ``te_low``, ``te_high`` time-equivalent
    columns): the geometric mean of its rows, with the row's interval for one row and the range of
    the rows' costs for several (an interval between a workload's cases would mix 2x and 500x)."""
    out = []
    for workload, rows in counted.groupby("workload", sort=False):
        te = rows["te"].to_numpy(dtype=float)
        typical = float(np.exp(np.log(te).mean()))
        if len(rows) == 1:
            low, high = float(rows["te_low"].iloc[0]), float(rows["te_high"].iloc[0])
        else:
            low, high = float(te.min()), float(te.max())
        top = rows.loc[rows["te"].idxmax()]
        case = top["case"] if isinstance(top["case"], str) and top["case"] else top["metric"]
        significant = rows[rows["significant"].astype(bool)]
        out.append(
            WorkloadCost(
                workload=str(workload),
                typical=typical,
                low=low,
                high=high,
                significant=len(significant),
                comparisons=len(rows),
                mde=median_mde(rows),
                worst=f"{fmt.percent((float(top['te']) - 1) * 100)} {case}",
                directions=frozenset(bool(v > 1) for v in significant["te"]),
            )
        )
    return out


def disagree(costs: list[WorkloadCost]) -> bool:
    """Whether a pooled cost would misdescribe the workloads: two workloads' costs differ in sign
    (one of them significant), or a significant cost's interval (or range) leaves out another's
    typical cost that is less than half or more than twice its size (on the log scale)."""
    if len(costs) < 2:
        return False
    for first in costs:
        if not first.distinguishable:
            continue
        size = abs(math.log(first.typical))
        for other in costs:
            if other is first or first.low <= other.typical <= first.high:
                continue
            other_size = abs(math.log(other.typical)) if other.typical > 0 else math.inf
            opposite = other.distinguishable and (other.typical > 1) != (first.typical > 1)
            if opposite or other_size * 2 < size or other_size > size * 2:
                return True
    return False


def cost_phrase(typical: float, low: float, high: float, distinguishable: bool, mde: float) -> str:
    """ "+4.2% [+2.1% to +6.3%]", or "no cost above 2.1% (the smallest this comparison could see)"."""
    if not distinguishable:
        if math.isnan(mde):
            return f"no cost distinguishable from noise (typical {fmt.percent((typical - 1) * 100)})"
        return f"no cost above {mde * 100:.1f}% (the smallest this comparison could see)"
    interval = "" if math.isnan(low) else f" [{fmt.percent((low - 1) * 100)} to {fmt.percent((high - 1) * 100)}]"
    return f"{fmt.percent((typical - 1) * 100)}{interval}"


def _fit(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def _first_fitting(candidates: list[str]) -> str:
    """The first candidate that fits WIDTH columns, else the last one cut to fit."""
    for text in candidates:
        if len(text) <= WIDTH:
            return text
    return _fit(candidates[-1])


def layer_lines(item) -> list[str]:
    """The headline of one LayerVerdict (ccbench.analysis.verdict): one line of at most 100 columns,
    and one more per workload where the workloads disagree."""
    name = "no layer (other machine or run)" if item.layer == "none" else item.layer
    costs = item.workload_costs
    plural = "s" if item.workloads != 1 else ""
    rests = f"{item.significant} of {item.comparisons} significant in {item.workloads} workload{plural}"
    short = f"{item.significant}/{item.comparisons} significant"
    if item.confounded and item.layer != "none":
        return [_fit(f"{name}: confounded ({fmt.percent(item.overhead)} measured, machines differ); {rests}")]
    if costs and disagree(costs):
        signs = {c.typical > 1 for c in costs if c.distinguishable}
        what = "signs" if len(signs) > 1 else "sizes"
        head = f"{name}: workloads disagree (significant costs of different {what})"
        lines = [_first_fitting([f"{head}; {rests}:", f"{head}:", f"{name}: workloads disagree ({what}):"])]
        for cost in costs:
            counts = f"{cost.significant} of {cost.comparisons} significant"
            worst = f"; worst {cost.worst}" if cost.distinguishable and cost.comparisons > 1 else ""
            lines.append(
                _first_fitting(
                    [f"  {cost.workload}: {cost.phrase()}; {counts}{worst}", f"  {cost.workload}: {cost.phrase()}"]
                )
            )
        return lines
    if item._per_message_only():
        return [_first_fitting([f"{name}: {item.typical_text()} of one unit of application work; {rests}"])]
    phrase = cost_phrase(item.typical, item.low, item.high, item.distinguishable, item.mde)
    worst = ""
    if item.worst and item.worst_overhead > 0:
        top = max(costs, key=lambda c: c.typical) if len(costs) > 1 else None
        worst = f"; worst {fmt.percent(item.worst_overhead)}" + (f" ({top.workload})" if top else "")
    return [
        _first_fitting(
            [
                f"{name}: {phrase}; {rests}{worst}",
                f"{name}: {phrase}; {short}{worst}",
                f"{name}: {phrase}; {short}",
                f"{name}: {phrase}",
            ]
        )
    ]


def headline(items) -> list[str]:
    """Every layer's lines, in the verdict's order."""
    return [line for item in items for line in layer_lines(item)]
