"""The microservices workload (seed 002): latency against throughput per configuration, the p99 ratio
to the baseline with its interval at each rate, where the time goes per tier, and whether the load
generator was the bottleneck."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from ccbench.analysis.statistics.stats import ratio_interval
from ccbench.report.charts import new_figure
from ccbench.report.chartstyle import PALETTE
from ccbench.report.sections import Figure, ReportContext, Section, Table, kind_data

ORDER = 55
DRAWS = True
PERCENTILES = ("p50", "p99", "p99.9")
TIER_ORDER = ["client", "nginx", "proxy_hop", "app", "memcached", "redis", "postgres"]


def _load_label(row: pd.Series) -> str:
    if row["mode"] == "closed":
        return f"closed loop, {int(row['connections'])} conn"
    return f"{row['rate']:g} req/s"


def _frame(ctx: ReportContext) -> pd.DataFrame | None:
    found = kind_data(ctx.samples, "microservices")
    if found is None:
        return None
    data, params = found
    data["mode"] = params.map(lambda p: p.get("mode"))
    data["rate"] = params.map(lambda p: p.get("rate"))
    data["connections"] = params.map(lambda p: p.get("connections"))
    data["tier"] = params.map(lambda p: p.get("tier"))
    data = data[data["mode"].notna()]
    if data.empty:
        return None
    data["load"] = data.apply(_load_label, axis=1)
    # one execution = (bundle, config, repetition): pairs a rate's latency with its achieved throughput
    data["execution"] = (
        data["bundle"].astype(str) + "|" + data["config"].astype(str) + "|" + data["repetition"].astype(str)
    )
    return data


def _baseline(ctx: ReportContext, configs: list[str]) -> str:
    if ctx.baseline in configs:
        return ctx.baseline
    plain = [c for c in configs if c.endswith("plain")]
    return plain[0] if plain else configs[0]


def _curves(data: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and rate: median achieved throughput and median/IQR of each percentile."""
    open_loop = data[(data["mode"] == "open") & data["tier"].isna()]
    rows = []
    for (config, rate), group in open_loop.groupby(["config", "rate"]):
        row = {"config": config, "rate": rate}
        throughput = group[group["metric"] == "throughput"]["value"]
        row["throughput"] = throughput.median() if not throughput.empty else np.nan
        for q in PERCENTILES:
            values = group[group["metric"] == f"latency_{q}"]["value"]
            row[q] = values.median() if not values.empty else np.nan
            row[f"{q}_q1"] = values.quantile(0.25) if not values.empty else np.nan
            row[f"{q}_q3"] = values.quantile(0.75) if not values.empty else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def draw_curves(curves: pd.DataFrame):
    """One panel per percentile: latency (log) against achieved throughput, one line per configuration."""
    fig = new_figure(figsize=(11.0, 3.6))
    axes = fig.subplots(1, len(PERCENTILES), sharex=True)
    configs = list(dict.fromkeys(curves["config"]))
    for ax, q in zip(axes, PERCENTILES):
        for index, config in enumerate(configs):
            rows = curves[curves["config"] == config].sort_values("rate")
            low = np.clip(rows[q] - rows[f"{q}_q1"], 0, None)
            high = np.clip(rows[f"{q}_q3"] - rows[q], 0, None)
            ax.errorbar(
                rows["throughput"],
                rows[q],
                yerr=[low, high],
                marker="o",
                markersize=3,
                capsize=2,
                color=PALETTE[index % len(PALETTE)],
                label=config,
            )
        ax.set_yscale("log")
        ax.set_title(f"latency {q}", fontsize=10)
        ax.set_xlabel("achieved throughput (req/s)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ms (median over repetitions; bars: IQR)")
    axes[-1].legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.16, wspace=0.25)
    return fig


def _p99_ratios(data: pd.DataFrame, baseline: str) -> pd.DataFrame | None:
    latency = data[(data["metric"] == "latency_p99") & data["tier"].isna()]
    rows = []
    for load, group in latency.groupby("load", sort=False):
        base = group[group["config"] == baseline]["value"].to_numpy()
        for config, other in group.groupby("config"):
            if config == baseline:
                continue
            interval = ratio_interval(base, other["value"].to_numpy())
            row = {
                "load": load,
                "configuration": config,
                "baseline p99 (ms)": np.median(base) if len(base) else np.nan,
                "p99 (ms)": other["value"].median(),
                "n": f"{len(base)}/{len(other)}",
            }
            if interval is None:
                row.update({"p99 ratio": np.nan, "95% interval": "(needs >= 2 repetitions each)", "significant": ""})
            else:
                row.update(
                    {
                        "p99 ratio": round(interval.ratio, 3),
                        "95% interval": f"{interval.low:.3f} - {interval.high:.3f}",
                        "significant": "yes" if interval.significant else "no",
                    }
                )
            rows.append(row)
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    order = {load: i for i, load in enumerate(sorted(set(frame["load"]), key=_load_key))}
    frame = frame.sort_values(["configuration", "load"], key=lambda s: s.map(order) if s.name == "load" else s)
    return frame.round({"baseline p99 (ms)": 2, "p99 (ms)": 2})


def _load_key(label: str) -> tuple[int, float]:
    if label.startswith("closed"):
        return (1, 0.0)
    return (0, float(label.split()[0]))


def _tiers(data: pd.DataFrame, metric: str) -> pd.DataFrame | None:
    rows = data[(data["metric"] == metric) & data["tier"].notna()]
    if rows.empty:
        return None
    table = rows.groupby(["config", "load", "tier"])["value"].median().unstack("tier")
    columns = [t for t in TIER_ORDER if t in table.columns] + [t for t in table.columns if t not in TIER_ORDER]
    table = table[columns]
    table = table.reset_index()
    table["_order"] = table["load"].map(_load_key)
    return table.sort_values(["config", "_order"]).drop(columns="_order")


def build(ctx: ReportContext) -> Section | None:
    data = _frame(ctx)
    if data is None:
        return None
    configs = list(dict.fromkeys(data["config"]))
    baseline = _baseline(ctx, configs)
    tables, figures = [], []
    curves = _curves(data)
    if not curves.empty:
        figures.append(
            Figure(
                "microservices-latency-throughput",
                partial(draw_curves, curves),
                "latency against achieved throughput per configuration (open loop, latency from "
                "each request's scheduled start)",
            )
        )
        summary = curves[["config", "rate", "throughput", *PERCENTILES]].rename(
            columns={
                "rate": "target rate (req/s)",
                "throughput": "achieved (req/s)",
                **{q: f"{q} (ms)" for q in PERCENTILES},
            }
        )
        tables.append(Table("open-loop rate sweep (medians over repetitions)", summary.round(2)))
    closed = data[(data["mode"] == "closed") & data["tier"].isna()]
    if not closed.empty:
        wide = closed.groupby(["config", "load", "metric"])["value"].median().unstack("metric")
        keep = [
            c
            for c in ("throughput", "latency_p50", "latency_p90", "latency_p99", "latency_p99.9", "errors")
            if c in wide
        ]
        tables.append(
            Table(
                "closed loop (wrk, as seed 002 measured; medians over repetitions)", wide[keep].reset_index().round(2)
            )
        )
    ratios = _p99_ratios(data, baseline)
    if ratios is not None:
        tables.append(
            Table(
                f"p99 latency relative to {baseline} at each load (ratio of geometric means, Welch 95% interval)",
                ratios,
            )
        )
    breakdown = _tiers(data, "tier_latency")
    if breakdown is not None:
        tables.append(
            Table(
                "where a request's time goes: mean ms per request in each tier (median over repetitions)",
                breakdown.round(3),
                note="client = load generator's mean latency less nginx's request time (the link and the "
                "client's own queue); proxy_hop = nginx-to-application hop; app = the application's "
                "own work; the stores = the application's waits on each (Server-Timing).",
            )
        )
    cpu = _tiers(data, "tier_cpu")
    if cpu is not None:
        loadgen = data[data["metric"] == "loadgen_cpu"].groupby(["config", "load"])["value"].median()
        cpu["load generator"] = [loadgen.get((c, load), np.nan) for c, load in zip(cpu["config"], cpu["load"])]
        tables.append(Table("CPU used per tier during the load (cores; median over repetitions)", cpu.round(3)))
    errors = data[(data["metric"] == "errors") & (data["value"] > 0)]
    saturated = data[(data["metric"] == "client_saturated") & (data["value"] > 0)]
    notes = []
    if not errors.empty:
        notes.append(f"{int(errors['value'].sum())} failed requests over {errors['execution'].nunique()} execution(s)")
    if not saturated.empty:
        loads = ", ".join(sorted(set(saturated["config"] + " at " + saturated["load"])))
        notes.append(f"the load generator, not the service, was saturated in: {loads}")
    intro = (
        "A DeathStarBench-like social network (nginx -> Go application tier -> memcached and Redis -> PostgreSQL) "
        "driven open-loop at fixed rates (oha --latency-correction) and closed-loop (wrk). Baseline: "
        f"{baseline}. "
        + ("; ".join(notes) + "." if notes else "No failed requests; the load generator was not saturated.")
    )
    return Section(title="Microservices (seed 002)", intro=intro, tables=tables, figures=figures)
