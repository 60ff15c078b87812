"""The overhead heatmap: workload case x configuration, the time ratio against the baseline (primary metrics)."""

from __future__ import annotations

from functools import partial

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import semantics
from ccbench.analysis.rows.compare import with_time_equivalent
from ccbench.report import charts, forest
from ccbench.report.sections import Figure, ReportContext, Section, Table
from ccbench.report.takeaways import scope_phrase

ORDER = 40
DRAWS = True
MAX_ROWS = 60


def merge_columns(configs: list[str]) -> dict[str, str]:
    """Put "vm / no TEE" (a workload without a storage variant) in the column of "vm / no TEE / disk"."""
    mapping = {}
    for config in configs:
        parts = set(config.split(" / "))
        wider = [
            c
            for c in configs
            if c != config and parts < set(c.split(" / ")) and set(c.split(" / ")) - parts <= {"disk", "plain"}
        ]
        mapping[config] = min(wider, key=len) if wider else config
    return mapping


def build(ctx: ReportContext) -> Section | None:
    comparison = ctx.comparison
    if comparison is None or comparison.empty:
        return None
    # the workloads' primary (application-level) metrics only: the supporting ones are in the table
    # a machine's own layers (against its own baseline) in columns of their own, as in the forest plot
    data = forest.own_columns(forest.primary(comparison, ctx.samples)).copy()
    if data.empty:
        return None
    data["row"] = data["workload"] + " " + data["case"].fillna("") + " " + data["metric"]
    data["row"] = data["row"].str.replace(r"\s+", " ", regex=True)
    data["config"] = data["config"].map(merge_columns(list(dict.fromkeys(data["config"]))))
    matrix = data.pivot_table(index="row", columns="config", values="overhead_percent", aggfunc="first", sort=False)
    if len(matrix) > MAX_ROWS:
        order = matrix.abs().max(axis=1).sort_values(ascending=False).index[:MAX_ROWS]
        matrix = matrix.loc[order]
    # the cells whose rows the verdict left out: drawn grey, in no count or takeaway
    data["left_out"] = semantics.implausible_mask(data)
    left_out = data.pivot_table(index="row", columns="config", values="left_out", aggfunc="first", sort=False)
    left_out = left_out.reindex(index=matrix.index, columns=matrix.columns).fillna(False).astype(bool)
    # not significant: pale and marked "~" (as compare's table), never read as a cost
    data["significant_cell"] = data["significant"].astype(bool)
    significant_cells = data.pivot_table(
        index="row", columns="config", values="significant_cell", aggfunc="first", sort=False
    )
    significant_cells = significant_cells.reindex(index=matrix.index, columns=matrix.columns).fillna(True).astype(bool)
    draw = partial(charts.heatmap, matrix, f"overhead against {ctx.baseline}", left_out, significant_cells)
    judged_cells = data[~data["left_out"]]
    dropped = len(data) - len(judged_cells)
    grey = (
        f"; {dropped} grey cell{'s' if dropped != 1 else ''} left out of the verdict (see its lint)" if dropped else ""
    )
    significant = judged_cells[judged_cells["significant"].astype(bool)]
    if significant.empty:
        # judged as the verdict judges a scope: benchmarks of one value each may still show a difference
        judged = semantics.judge(with_time_equivalent(data))
        said = scope_phrase(judged, judged_cells, ctx.layer_verdicts())
        takeaway = f"No cell is significant on its own; all cells together: {said}{grey}."
    else:
        per_config = significant.groupby("config", sort=False)["overhead_percent"].median()
        worst = per_config.idxmax()
        takeaway = (
            f"{len(significant)} of {len(judged_cells)} cells are significant{grey}; {worst} has the highest median "
            f"significant cost ({fmt.effect(1 + per_config[worst] / 100)}). Read rows across for what a "
            "configuration costs each workload, columns down for which workloads a configuration hurts."
        )

    def words(percent):
        return fmt.effect(1 + percent / 100) if not fmt.missing(percent) else "-"

    text = matrix.map(words) if hasattr(matrix, "map") else matrix.applymap(words)
    text = text.mask(left_out, text.astype(str) + " (left out)")
    text = text.mask(~significant_cells & ~left_out, text.astype(str) + " ~ (not significant)")
    text.index.name = "workload case metric"
    return Section(
        title="Overhead heatmap",
        intro="Time ratio against the baseline on the workloads' primary metrics (red = slower, blue = faster)"
        + (f"; the {MAX_ROWS} rows with the largest effects" if len(data["row"].unique()) > MAX_ROWS else "")
        + ".",
        figures=[
            Figure(
                name="overhead-heatmap",
                draw=draw,
                caption="time ratio by workload case (primary metrics) and configuration; colour = log2 of the ratio, "
                "clipped at 1/4x and 4x (the cell's label gives its ratio); pale, marked ~: not significant; "
                "grey: left out of the verdict",
                takeaway=takeaway,
            )
        ],
        tables=[Table("the cost in words (the numbers of the heatmap)", text.reset_index(), formats=("md",))],
    )
