"""The seed-004 transport tables: handshake latency, round-trip overhead against plaintext,
throughput against the AEAD ceiling, the share of an embedding's time, and the channel's targets."""

from __future__ import annotations

import json
from functools import partial

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.report import charts
from ccbench.report.sections import Figure, ReportContext, Section, Table, kind_data

ORDER = 50
DRAWS = True
#: charted here, left out of the per-workload charts (sections/workloads): the per-cell metrics
CHARTED_HERE = {"transport": "cell"}
TRANSPORTS = ["plain", "tls", "securechannel"]


def _int_payload(frame: pd.DataFrame) -> pd.DataFrame:
    if "payload" in frame:
        frame["payload"] = frame["payload"].map(lambda v: int(v) if pd.notna(v) else v)
    return frame


def _targets(
    data: pd.DataFrame, rtt: pd.DataFrame, throughput: pd.DataFrame, handshake_p50: pd.DataFrame
) -> pd.DataFrame | None:
    """The issue's targets, from the medians of this bundle (each transport measured in the same run)."""
    rows = [
        *_throughput_targets(data, throughput),
        *_round_trip_targets(rtt),
        *_handshake_targets(handshake_p50),
        *_floor_targets(data),
        *_context_rows(data),
    ]
    return pd.DataFrame(rows) if rows else None


def _target(name: str, value: float, target: str, met: bool) -> list[dict]:
    """A target's row, or none where it was not measured."""
    if pd.isna(value):
        return []
    return [{"target": name, "measured": round(float(value), 3), "wanted": target, "met": "yes" if met else "no"}]


def _median(data: pd.DataFrame, metric: str) -> float:
    return data[data["metric"] == metric]["value"].median()


def _throughput_targets(data: pd.DataFrame, throughput: pd.DataFrame) -> list[dict]:
    if "securechannel" not in throughput:
        return []
    share = _median(data, "target_throughput_1MiB_share_of_aead")
    rows = []
    for (_machine, pipe, payload), row in throughput.iterrows():
        if payload == 1048576 and pipe == "duplex":
            rows += _target(
                "1 MiB throughput (MB/s, duplex)", row["securechannel"], ">= 2000", row["securechannel"] >= 2000
            )
            rows += _target("1 MiB throughput / AEAD ceiling", share, ">= 0.70", share >= 0.70)
            if "tls" in throughput:
                rows += _target(
                    "1 MiB throughput / TLS (duplex)",
                    row["securechannel"] / row["tls"],
                    "> 1",
                    row["securechannel"] > row["tls"],
                )
    return rows


def _round_trip_targets(rtt: pd.DataFrame) -> list[dict]:
    if "securechannel" not in rtt or "plain" not in rtt:
        return []
    rows = []
    for (_machine, pipe, payload), row in rtt.iterrows():
        if payload == 1536:
            ratio = row["securechannel"] / row["plain"]
            rows += _target(f"1536 B round trip / plaintext ({pipe})", ratio, "<= 1.15", ratio <= 1.15)
            if "tls" in rtt:
                rows += _target(
                    f"1536 B round trip / TLS ({pipe})",
                    row["securechannel"] / row["tls"],
                    "< 1",
                    row["securechannel"] < row["tls"],
                )
    return rows


def _handshake_targets(handshake_p50: pd.DataFrame) -> list[dict]:
    if "securechannel" not in handshake_p50:
        return []
    rows = []
    for pipe, row in handshake_p50.iterrows():
        rows += _target(f"handshake p50 (us, {pipe})", row["securechannel"], "<= 100", row["securechannel"] <= 100)
        if "tls" in handshake_p50:
            rows += _target(
                f"handshake p50 / TLS ({pipe})",
                row["securechannel"] / row["tls"],
                "< 1",
                row["securechannel"] < row["tls"],
            )
    return rows


def _floor_targets(data: pd.DataFrame) -> list[dict]:
    """The handshake against the X25519 floor measured in the same run, and the floor itself."""
    floor = _median(data, "x25519_handshake_floor")
    if pd.isna(floor):
        return []
    # ratio to the floor measured in the same run (each execution's own ratio, then the median)
    ratio = _median(data, "target_handshake_vs_x25519_floor")
    return _target("handshake p50 / X25519 floor (duplex)", ratio, "<= 1.2", ratio <= 1.2) + [
        {
            "target": "X25519 floor of a handshake, both sides on one core (us)",
            "measured": round(float(floor), 1),
            "wanted": "(context)",
            "met": "",
        }
    ]


def _context_rows(data: pd.DataFrame) -> list[dict]:
    """Costs shown beside the targets for context: the Noise handshake alone, verifying real evidence."""
    rows = []
    for metric, label in (
        ("noise_nn_handshake_p50", "Noise NN alone (snow, in memory), p50 (us)"),
        ("verify_snp_report_p50", "verify one real SEV-SNP report (VCEK, AMD chain), p50 (us)"),
        ("verify_tdx_quote_p50", "verify one real TDX quote (DCAP collateral), p50 (us)"),
    ):
        value = _median(data, metric)
        if pd.notna(value):
            rows.append({"target": label, "measured": round(float(value), 1), "wanted": "(context)", "met": ""})
    return rows


def build(ctx: ReportContext) -> Section | None:
    data = _transport_samples(ctx.samples)
    if data is None:
        return None
    rtt = _medians(data, "rtt_p50", ["machine", "pipe", "payload"])
    throughput = _medians(data, "throughput", ["machine", "pipe", "payload"])
    # the application's view first: what a protected transport adds to one embedding
    tables = [
        _embedding_table(data),
        _handshake_table(data),
        _rtt_table(rtt),
        _throughput_table(data, throughput),
        _targets_table(data, rtt, throughput),
    ]
    tables = [table for table in tables if table is not None]
    if not tables:
        return None
    return Section(
        title="Transport",
        intro="Plaintext, ccbench's attested secure channel (Noise NN + AEAD records, mock attestation) and "
        "TLS 1.3 (rustls) measured in the same run on the same machine; both ends share one core. The tables "
        "after the first are per-message microbenchmarks: a round trip over an in-process pipe takes about a "
        "microsecond, so a protection's percentage there is large while its share of an inference (the first "
        "table, and the verdict) is small.",
        tables=tables,
        figures=_rtt_figures(data, rtt, ctx.colours, ctx.comparison),
    )


def _transport_samples(samples: pd.DataFrame) -> pd.DataFrame | None:
    """The measured transport samples with their pipe and payload as columns (a missing transport is
    plaintext), or None when there are none."""
    found = kind_data(samples, "transport")
    if found is None:
        return None
    data, params = found
    data["pipe"] = params.map(lambda p: p.get("pipe"))
    data["payload"] = params.map(lambda p: p.get("payload"))
    data["transport"] = data["transport"].fillna("plain")
    return data


def _medians(data: pd.DataFrame, metric: str, keys: list[str]) -> pd.DataFrame:
    """The metric's median per ``keys``, one column per transport."""
    rows = data[data["metric"] == metric]
    return rows.groupby(keys + ["transport"], dropna=False)["value"].median().unstack("transport")


def _handshake_table(data: pd.DataFrame) -> Table | None:
    handshake = pd.concat(
        {q: _medians(data, f"handshake_{q}", ["machine", "pipe"]) for q in ("p50", "p95", "p99")}, axis=1
    )
    if handshake.empty:
        return None
    handshake.columns = [f"{transport} {q} (us)" for q, transport in handshake.columns]
    return Table(
        "handshake latency (median over executions of each run's percentile)", handshake.reset_index().round(1)
    )


def _rtt_table(rtt: pd.DataFrame) -> Table | None:
    """Round-trip medians per transport, and each protected transport against plaintext."""
    if rtt.empty or "plain" not in rtt:
        return None
    out = rtt.copy()
    for transport in ("tls", "securechannel"):
        if transport in rtt:
            out[f"{transport} vs plain"] = (rtt[transport] / rtt["plain"] - 1).map(lambda v: f"{v:+.0%}")
    out = out.rename(columns={t: f"{t} p50 (us)" for t in TRANSPORTS})
    return Table("request/response round trip, p50", _int_payload(out.reset_index().round(1)))


def _rtt_figures(
    data: pd.DataFrame, rtt: pd.DataFrame, colours: dict[str, str], comparison: pd.DataFrame | None = None
) -> list[Figure]:
    """The round trip by payload and transport, and relative to plaintext, for the first pipe."""
    if rtt.empty or "plain" not in rtt:
        return []
    # charts by configuration label, so that each transport keeps its report-wide colour
    pipe = rtt.reset_index()["pipe"].iloc[0]
    rows = data[(data["metric"] == "rtt_p50") & (data["pipe"] == pipe)]
    long = (
        rows.groupby(["machine", "config", "payload"], sort=False)["value"]
        .agg(median="median", q1=lambda v: v.quantile(0.25), q3=lambda v: v.quantile(0.75))
        .reset_index()
    )
    long = long.sort_values("payload", kind="stable")
    long["case"] = long["payload"].map(_payload_text)
    figures = [
        Figure(
            "transport-rtt",
            partial(charts.grouped_bars, long, f"round trip p50 ({pipe})", "us", "lower", colours, True),
            "round trip p50 by payload and transport (log axis: 1.5 KiB and 1 MiB differ a thousandfold)",
            takeaway=_rtt_takeaway(rtt, pipe, data, comparison),
        )
    ]
    ratios = _relative_to_plain(data, long)
    if not ratios.empty:
        figures.append(
            Figure(
                "transport-rtt-ratio",
                partial(
                    charts.grouped_bars,
                    ratios,
                    f"round trip p50 relative to plaintext ({pipe})",
                    "x plaintext",
                    "lower",
                    colours,
                    False,
                ),
                "round-trip time of each protected transport divided by plaintext's, per payload",
                takeaway="Bars above 1 are the transport's cost per round trip; where they approach 1 "
                "the encryption is hidden by the rest of the round trip.",
            )
        )
    return figures


def _relative_to_plain(data: pd.DataFrame, long: pd.DataFrame) -> pd.DataFrame:
    """The protected configurations' rows of ``long`` with their median divided by plaintext's on the
    same machine and payload (the quartiles set to it: a ratio of medians has no spread of its own)."""
    plain_configs = set(data.loc[data["transport"] == "plain", "config"])
    ratios = long.merge(
        long[long["config"].isin(plain_configs)][["machine", "payload", "median"]].rename(columns={"median": "plain"}),
        on=["machine", "payload"],
    )
    ratios = ratios[~ratios["config"].isin(plain_configs)]
    if not ratios.empty:
        ratios["median"] = ratios["median"] / ratios["plain"]
        ratios["q1"] = ratios["q3"] = ratios["median"]
    return ratios


def _throughput_table(data: pd.DataFrame, throughput: pd.DataFrame) -> Table | None:
    """One-way throughput per transport, the secure channel's against the AEAD ceiling of one core."""
    if throughput.empty:
        return None
    out = throughput.rename(columns={t: f"{t} MB/s" for t in TRANSPORTS}).round(0)
    ceiling = data[data["metric"] == "aead_seal_open"]["value"].median()
    if pd.notna(ceiling) and "securechannel" in throughput:
        out["securechannel / AEAD ceiling"] = (throughput["securechannel"] / ceiling).map(lambda v: f"{v:.0%}")
    return Table(
        f"one-way throughput (AEAD seal+open ceiling of one core: {ceiling:,.0f} MB/s)"
        if pd.notna(ceiling)
        else "one-way throughput",
        _int_payload(out.reset_index()),
    )


def _embedding_table(data: pd.DataFrame) -> Table | None:
    """The handshake and the extra round-trip time of each protected transport as a share of one
    embedding measured on the same machine."""
    embedding = data[data["metric"] == "embedding_time"]["value"].median()
    if not (pd.notna(embedding) and embedding > 0):
        return None
    frame = pd.DataFrame(_handshake_costs(data) + _round_trip_costs(data))
    if frame.empty:
        return None
    frame["share of one embedding"] = frame["us"] / (embedding * 1000)
    frame["us"] = frame["us"].round(1)
    frame["share of one embedding"] = frame["share of one embedding"].map(lambda v: f"{v:.3%}")
    return Table(
        f"transport costs as a share of one MiniLM-L6-v2 embedding on this machine ({embedding:.1f} ms)", frame
    )


def _handshake_costs(data: pd.DataFrame) -> list[dict]:
    hs = _medians(data, "handshake_p50", ["pipe"])
    return [
        {"cost": f"{transport} handshake p50 ({pipe})", "us": hs.loc[pipe, transport]}
        for pipe in hs.index
        for transport in ("tls", "securechannel")
        if transport in hs
    ]


def _round_trip_costs(data: pd.DataFrame) -> list[dict]:
    """Each protected transport's round trip at 1536 B minus plaintext's."""
    rt = _medians(data, "rtt_p50", ["pipe", "payload"])
    if "plain" not in rt:
        return []
    return [
        {
            "cost": f"{transport} extra round-trip time, 1536 B ({pipe})",
            "us": rt.loc[(pipe, payload), transport] - rt.loc[(pipe, payload), "plain"],
        }
        for pipe, payload in rt.index
        if payload == 1536
        for transport in ("tls", "securechannel")
        if transport in rt
    ]


def _targets_table(data: pd.DataFrame, rtt: pd.DataFrame, throughput: pd.DataFrame) -> Table | None:
    targets = _targets(data, rtt, throughput, handshake_p50=_medians(data, "handshake_p50", ["pipe"]))
    if targets is None:
        return None
    return Table("the secure channel's targets (medians over executions; see docs/secure-channel.md)", targets)


def _payload_text(payload) -> str:
    payload = int(payload)
    for size, unit in ((2**20, "MiB"), (2**10, "KiB")):
        if payload >= size and payload % (size // 4) == 0:
            return f"{payload / size:g} {unit}"
    return f"{payload} B"


def _rtt_takeaway(
    rtt: pd.DataFrame, pipe: str, data: pd.DataFrame | None = None, comparison: pd.DataFrame | None = None
) -> str:
    """The overhead at the smallest payload against plaintext, where encryption weighs most per byte,
    in the verdict's words for a cost ("tls 4.0x slower [4.0x, 4.1x]"): with the comparison row's 95%
    interval where the comparison has that case, else from the medians alone."""
    if "plain" not in rtt:
        return ""
    frame = rtt.reset_index()
    frame = frame[frame["pipe"] == pipe].sort_values("payload")
    if frame.empty:
        return ""
    first = frame.iloc[0]
    rows = _rtt_rows(data, comparison, first["machine"], pipe, first["payload"])
    parts = [
        f"{t} {fmt.row_effect(rows[t]) if t in rows else fmt.effect(first[t] / first['plain'])}"
        for t in ("tls", "securechannel")
        if t in frame and pd.notna(first[t])
    ]
    if not parts:
        return ""
    return (
        f"At {_payload_text(first['payload'])}, the smallest payload, against plaintext: {', '.join(parts)}; "
        "the log axis keeps the small payloads readable beside the large ones."
    )


def _rtt_rows(
    data: pd.DataFrame | None, comparison: pd.DataFrame | None, machine, pipe: str, payload
) -> dict[str, pd.Series]:
    """The comparison's round-trip row of each protected transport on ``machine`` at this pipe and
    payload against the same machine's plaintext: transport -> row."""
    if data is None or comparison is None or comparison.empty:
        return {}
    configs = data.drop_duplicates("config").set_index("config")[["machine", "transport"]]
    rows = comparison[comparison["metric"] == "rtt_p50"]
    found = {}
    for _, row in rows.iterrows():
        config, baseline = configs.reindex([row["config"], row["baseline"]]).to_dict("records")
        params = json.loads(row["params"]) if isinstance(row["params"], str) else (row["params"] or {})
        if (
            config["machine"] == machine == baseline["machine"]
            and baseline["transport"] == "plain"
            and params.get("pipe") == pipe
            and params.get("payload") == payload
        ):
            found.setdefault(config["transport"], row)
    return found
