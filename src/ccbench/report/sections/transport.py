"""The seed-004 transport tables: handshake latency, round-trip overhead against plaintext,
throughput against the AEAD ceiling, the share of an embedding's time, and the channel's targets."""

from __future__ import annotations

import json
from functools import partial

import pandas as pd

from ccbench.report import charts
from ccbench.report.sections import Figure, ReportContext, Section, Table

ORDER = 50
TRANSPORTS = ["plain", "tls", "securechannel"]


def _param(frame: pd.DataFrame, key: str) -> pd.Series:
    return frame["params"].map(lambda p: json.loads(p).get(key))


def _int_payload(frame: pd.DataFrame) -> pd.DataFrame:
    if "payload" in frame:
        frame["payload"] = frame["payload"].map(lambda v: int(v) if pd.notna(v) else v)
    return frame


def _targets(data: pd.DataFrame, rtt: pd.DataFrame, throughput: pd.DataFrame, handshake_p50: pd.DataFrame) -> pd.DataFrame | None:
    """The issue's targets, from the medians of this bundle (each transport measured in the same run)."""
    rows = []

    def add(name: str, value: float, target: str, met: bool) -> None:
        if pd.notna(value):
            rows.append({"target": name, "measured": round(float(value), 3), "wanted": target, "met": "yes" if met else "no"})

    def median(metric: str) -> float:
        return data[data["metric"] == metric]["value"].median()

    share = median("target_throughput_1MiB_share_of_aead")
    if "securechannel" in throughput:
        for (machine, pipe, payload), row in throughput.iterrows():
            if payload == 1048576 and pipe == "duplex":
                add("1 MiB throughput (MB/s, duplex)", row["securechannel"], ">= 2000", row["securechannel"] >= 2000)
                add("1 MiB throughput / AEAD ceiling", share, ">= 0.70", share >= 0.70)
                if "tls" in throughput:
                    add("1 MiB throughput / TLS (duplex)", row["securechannel"] / row["tls"], "> 1", row["securechannel"] > row["tls"])
    if "securechannel" in rtt and "plain" in rtt:
        for (machine, pipe, payload), row in rtt.iterrows():
            if payload == 1536:
                ratio = row["securechannel"] / row["plain"]
                add(f"1536 B round trip / plaintext ({pipe})", ratio, "<= 1.15", ratio <= 1.15)
                if "tls" in rtt:
                    add(f"1536 B round trip / TLS ({pipe})", row["securechannel"] / row["tls"], "< 1", row["securechannel"] < row["tls"])
    if "securechannel" in handshake_p50:
        for pipe, row in handshake_p50.iterrows():
            add(f"handshake p50 (us, {pipe})", row["securechannel"], "<= 100", row["securechannel"] <= 100)
            if "tls" in handshake_p50:
                add(f"handshake p50 / TLS ({pipe})", row["securechannel"] / row["tls"], "< 1", row["securechannel"] < row["tls"])
    floor = median("x25519_handshake_floor")
    if pd.notna(floor):
        # ratio to the floor measured in the same run (each execution's own ratio, then the median)
        ratio = median("target_handshake_vs_x25519_floor")
        add("handshake p50 / X25519 floor (duplex)", ratio, "<= 1.2", ratio <= 1.2)
        rows.append({"target": "X25519 floor of a handshake, both sides on one core (us)", "measured": round(float(floor), 1),
                     "wanted": "(context)", "met": ""})
    for metric, label in (("noise_nn_handshake_p50", "Noise NN alone (snow, in memory), p50 (us)"),
                          ("verify_snp_report_p50", "verify one real SEV-SNP report (VCEK, AMD chain), p50 (us)"),
                          ("verify_tdx_quote_p50", "verify one real TDX quote (DCAP collateral), p50 (us)")):
        value = median(metric)
        if pd.notna(value):
            rows.append({"target": label, "measured": round(float(value), 1), "wanted": "(context)", "met": ""})
    return pd.DataFrame(rows) if rows else None


def build(ctx: ReportContext) -> Section | None:
    samples = ctx.samples
    if samples.empty or "transport" not in set(samples["kind"]):
        return None
    data = samples[(samples["kind"] == "transport") & (~samples["warmup"])].copy()
    if data.empty:
        return None
    data["pipe"] = _param(data, "pipe")
    data["payload"] = _param(data, "payload")
    data["transport"] = data["transport"].fillna("plain")
    tables, figures = [], []

    def medians(metric: str, keys: list[str]) -> pd.DataFrame:
        rows = data[data["metric"] == metric]
        return rows.groupby(keys + ["transport"], dropna=False)["value"].median().unstack("transport")

    handshake = pd.concat({q: medians(f"handshake_{q}", ["machine", "pipe"]) for q in ("p50", "p95", "p99")}, axis=1)
    if not handshake.empty:
        handshake.columns = [f"{transport} {q} (us)" for q, transport in handshake.columns]
        tables.append(Table("handshake latency (median over executions of each run's percentile)",
                            handshake.reset_index().round(1)))

    rtt = medians("rtt_p50", ["machine", "pipe", "payload"])
    if not rtt.empty and "plain" in rtt:
        out = rtt.copy()
        for transport in ("tls", "securechannel"):
            if transport in rtt:
                out[f"{transport} vs plain"] = (rtt[transport] / rtt["plain"] - 1).map(lambda v: f"{v:+.0%}")
        out = out.rename(columns={t: f"{t} p50 (us)" for t in TRANSPORTS})
        tables.append(Table("request/response round trip, p50", _int_payload(out.reset_index().round(1))))
        # charts by configuration label, so that each transport keeps its report-wide colour
        pipe = rtt.reset_index()["pipe"].iloc[0]
        rows = data[(data["metric"] == "rtt_p50") & (data["pipe"] == pipe)]
        long = rows.groupby(["machine", "config", "payload"], sort=False)["value"].agg(
            median="median", q1=lambda v: v.quantile(0.25), q3=lambda v: v.quantile(0.75)).reset_index()
        long = long.sort_values("payload", kind="stable")
        long["case"] = long["payload"].map(_payload_text)
        figures.append(Figure("transport-rtt", partial(charts.grouped_bars, long, f"round trip p50 ({pipe})", "us", "lower",
                                                       ctx.colours, True),
                              "round trip p50 by payload and transport (log axis: 1.5 KiB and 1 MiB differ a thousandfold)",
                              takeaway=_rtt_takeaway(rtt, pipe)))
        plain_configs = set(data.loc[data["transport"] == "plain", "config"])
        ratios = long.merge(long[long["config"].isin(plain_configs)][["machine", "payload", "median"]]
                            .rename(columns={"median": "plain"}), on=["machine", "payload"])
        ratios = ratios[~ratios["config"].isin(plain_configs)]
        if not ratios.empty:
            ratios["median"] = ratios["median"] / ratios["plain"]
            ratios["q1"] = ratios["q3"] = ratios["median"]
            figures.append(Figure("transport-rtt-ratio", partial(charts.grouped_bars, ratios,
                                                                 f"round trip p50 relative to plaintext ({pipe})",
                                                                 "x plaintext", "lower", ctx.colours, False),
                                  "round-trip time of each protected transport divided by plaintext's, per payload",
                                  takeaway="Bars above 1 are the transport's cost per round trip; where they approach 1 "
                                           "the encryption is hidden by the rest of the round trip."))

    throughput = medians("throughput", ["machine", "pipe", "payload"])
    if not throughput.empty:
        out = throughput.rename(columns={t: f"{t} MB/s" for t in TRANSPORTS}).round(0)
        ceiling = data[data["metric"] == "aead_seal_open"]["value"].median()
        if pd.notna(ceiling) and "securechannel" in throughput:
            out["securechannel / AEAD ceiling"] = (throughput["securechannel"] / ceiling).map(lambda v: f"{v:.0%}")
        tables.append(Table(f"one-way throughput (AEAD seal+open ceiling of one core: {ceiling:,.0f} MB/s)"
                            if pd.notna(ceiling) else "one-way throughput", _int_payload(out.reset_index())))

    embedding = data[data["metric"] == "embedding_time"]["value"].median()
    if pd.notna(embedding) and embedding > 0:
        rows = []
        hs = medians("handshake_p50", ["pipe"])
        for pipe in hs.index:
            for transport in ("tls", "securechannel"):
                if transport in hs:
                    rows.append({"cost": f"{transport} handshake p50 ({pipe})", "us": hs.loc[pipe, transport],
                                 "share of one embedding": hs.loc[pipe, transport] / (embedding * 1000)})
        rt = medians("rtt_p50", ["pipe", "payload"])
        for (pipe, payload) in rt.index:
            if payload == 1536 and "plain" in rt:
                for transport in ("tls", "securechannel"):
                    if transport in rt:
                        extra = rt.loc[(pipe, payload), transport] - rt.loc[(pipe, payload), "plain"]
                        rows.append({"cost": f"{transport} extra round-trip time, 1536 B ({pipe})", "us": extra,
                                     "share of one embedding": extra / (embedding * 1000)})
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["us"] = frame["us"].round(1)
            frame["share of one embedding"] = frame["share of one embedding"].map(lambda v: f"{v:.3%}")
            tables.append(Table(f"transport costs as a share of one MiniLM-L6-v2 embedding on this machine ({embedding:.1f} ms)",
                                frame))

    targets = _targets(data, rtt, throughput, handshake_p50=medians("handshake_p50", ["pipe"]))
    if targets is not None:
        tables.append(Table("the secure channel's targets (medians over executions; see docs/secure-channel.md)", targets))
    if not tables:
        return None
    return Section(title="Transport",
                   intro="Plaintext, ccbench's attested secure channel (Noise NN + AEAD records, mock attestation) and "
                         "TLS 1.3 (rustls) measured in the same run on the same machine; both ends share one core.",
                   tables=tables, figures=figures)


def _payload_text(payload) -> str:
    payload = int(payload)
    for size, unit in ((2**20, "MiB"), (2**10, "KiB")):
        if payload >= size and payload % (size // 4) == 0:
            return f"{payload / size:g} {unit}"
    return f"{payload} B"


def _rtt_takeaway(rtt: pd.DataFrame, pipe: str) -> str:
    """The overhead at the smallest payload against plaintext, where encryption weighs most per byte."""
    if "plain" not in rtt:
        return ""
    frame = rtt.reset_index()
    frame = frame[frame["pipe"] == pipe].sort_values("payload")
    if frame.empty:
        return ""
    first = frame.iloc[0]
    parts = [f"{t} {first[t] / first['plain'] - 1:+.0%}" for t in ("tls", "securechannel") if t in frame and pd.notna(first[t])]
    if not parts:
        return ""
    return (f"At {_payload_text(first['payload'])}, the smallest payload, against plaintext: {', '.join(parts)}; "
            "the log axis keeps the small payloads readable beside the large ones.")
