"""Numbers that cannot be what they claim (docs/analysis.md, "Implausible rows"): each row of the
comparison table gets ``implausible``, a short reason ("" when nothing is wrong), and the lint one
finding per configuration and reason naming the rows. The verdict leaves those rows out of its
headline. Pure functions over the comparison table and the configurations' facts (machine and
storage label per configuration); nothing here re-reads a bundle.

Three checks, each on the medians of one side (the configuration's, and the baseline's) of a case
of a storage benchmark (the groups that report ``iops`` and ``clat_mean``, as fio does):

* **Little's law.** A job keeps at most ``iodepth x numjobs`` I/Os in flight (an asynchronous
  engine; a synchronous one, psync and the like, one per job), so IOPS x mean completion latency
  (the mean number in flight) cannot exceed it; far below it (under an eighth), the completion
  latency does not account for the time the throughput took (the I/O was done at submission, as
  buffered I/O is, or the job was held elsewhere); a mixed pattern shares the depth between its
  directions, so only the upper bound is held there. The throughput is also IOPS x block size.
* **Direct I/O served buffered.** A job that asked for O_DIRECT on fscrypt or gocryptfs is served
  through the page cache: ext4 (fs/ext4/inode.c ``ext4_dio_alignment``) answers 0, "no direct I/O",
  for an encrypted file unless ``fscrypt_dio_supported`` (fs/crypto/inline_crypt.c) says the file
  uses inline encryption (a filesystem mounted with ``inlinecrypt`` on a device or the blk-crypto
  fallback), and ``ext4_dio_read_iter``/``ext4_dio_write_iter`` (fs/ext4/file.c) then fall back to
  buffered I/O without an error; gocryptfs clears O_DIRECT when it opens the backing file
  (``mangleOpenFlags``: its crypto header breaks the alignment). ccbench's fscrypt variant mounts
  without ``inlinecrypt``. Such a row measures the page cache against direct I/O on the other side.
* **Faster than the ceiling.** A storage variant more than CEILING_MARGIN faster than tmpfs on the
  same machine, same case, is not measuring its storage (memory is the ceiling of a file system).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from ccbench.analysis.format import finite

#: the mean number of I/Os in flight may exceed the job's depth by this share (rounding of the
#: medians of separate executions) before it is impossible
INFLIGHT_OVER = 1.25
#: below this share of the job's depth in flight, the completion latency does not explain the throughput
INFLIGHT_UNDER = 1 / 8
#: throughput and IOPS x block size may differ by this share (fio reports both from the same count)
BLOCK_TOLERANCE = 0.10
#: a storage variant this much faster than tmpfs on the same machine is not measuring its storage
CEILING_MARGIN = 0.25
#: storage labels (ccbench.analysis.samples.load.storage_label) whose O_DIRECT is served buffered
BUFFERED_DIRECT = {
    "fscrypt": "ext4 with fscrypt serves O_DIRECT through the page cache without inline encryption",
    "gocryptfs": "gocryptfs clears O_DIRECT on its backing files",
}
#: the reason (and its kind) where IOPS x mean latency (Little's law: the I/Os in flight) is not what the
#: job keeps in flight
DISAGREE = "IOPS and latency disagree"
#: fio's engines that keep several I/Os in flight per job (others: one at a time, iodepth unused)
ASYNC_ENGINES = {"libaio", "io_uring", "io_uring_cmd", "posixaio", "windowsaio", "solarisaio", "rdma", "spdk"}
#: fio's mixed patterns: the job's depth is shared between the directions, each reported apart, so
#: a direction may keep few in flight (rwmixread = 95: the writes); only the upper bound holds
MIXED = {"rw", "readwrite", "randrw", "trimwrite", "randtrimwrite"}
#: the memory-backed variant: the ceiling of the storage variants on its machine
CEILING = "tmpfs"
#: the fio metrics the checks read
IOPS, CLAT, THROUGHPUT = "iops", "clat_mean", "throughput"

_SIZE = re.compile(r"^(\d+)([kmgt]?)(i?b?)$")


def block_bytes(text: Any) -> int | None:
    """A block size as fio writes it ("4k", "1m", "4096", "64KiB") in bytes (fio's k is 1024); None for ranges
    and per-direction lists."""
    match = _SIZE.match(str(text or "").strip().lower())
    if not match:
        return None
    return int(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " ")


def _params(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int | None) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number >= 1 else default


def job_depth(params: dict[str, Any]) -> int | None:
    """The most I/Os the job can keep in flight: iodepth (async engines; 1 for synchronous ones)
    times numjobs; None where the params do not state iodepth."""
    if "iodepth" not in params:
        return None
    depth = _int(params.get("iodepth"), None)
    if depth is None:
        return None
    engine = str(params.get("ioengine") or "psync")
    return (depth if engine in ASYNC_ENGINES else 1) * (_int(params.get("numjobs"), 1) or 1)


def _direct(params: dict[str, Any]) -> bool:
    return str(params.get("direct", "")).lower() in ("1", "true")


def _figure(value: float) -> str:
    """3 significant digits below 100, whole numbers above: 1.2, 45.3, 8969; never an exponent"""
    from ccbench.analysis.format import significant

    return significant(value, 3) if abs(value) < 100 else f"{value:.0f}"


def _small(value: float) -> str:
    """Two significant digits, never an exponent: 0.45, 0.0031"""
    from ccbench.analysis.format import significant

    return significant(value, 2)


def spread_factor(spread: dict[str, float] | None) -> float:
    """How far the product of two medians taken over separate executions may stray from what each
    execution obeys (Little's law holds in each; across executions of very different speed, a busy
    machine, the median IOPS and the median latency come from different ones, and an even count's
    medians are means of two). Each execution's IOPS x latency is its own in-flight count, so the
    medians' product is one execution's count times a ratio of two executions' IOPS (or latencies):
    it strays by at most the largest over the smallest of them. With ``n`` executions, no value lies
    further from the mean than the CV x (n - 1) / sqrt(n) (Samuelson's inequality), so that ratio is
    at most (1 + k) / (1 - k), k = CV x (n - 1) / sqrt(n), unbounded from k = 1 (exact at n = 2); the
    smaller of IOPS's and the latency's holds (``spread``: {metric: CV, "n:<metric>": executions}).
    Without the counts: (1 + CV of IOPS) x (1 + CV of the latency). 1 where nothing is known."""
    spread = spread or {}
    cvs = [finite(spread.get(m)) for m in (IOPS, CLAT)]
    counts = [finite(spread.get(f"n:{m}")) for m in (IOPS, CLAT)]
    ratios = []
    for cv, n in zip(cvs, counts, strict=True):
        if cv is not None and n is not None and n >= 2:
            k = max(cv, 0.0) * (n - 1) / math.sqrt(n)
            ratios.append((1 + k) / (1 - k) if k < 1 else math.inf)
    if ratios:
        return min(ratios)
    factor = 1.0
    for cv in cvs:
        factor *= 1 + cv if cv and cv > 0 else 1.0
    return factor


def side_reasons(
    metrics: dict[str, float], params: dict[str, Any], spread: dict[str, float] | None = None
) -> list[str]:
    """Little's law and IOPS x block size on one side's medians ({metric: median}); ``spread``: each
    metric's coefficient of variation over the executions, which widens Little's law's bounds
    (spread_factor)."""
    reasons = []
    iops, clat, throughput = (finite(metrics.get(m)) for m in (IOPS, CLAT, THROUGHPUT))
    depth = job_depth(params)
    if iops and clat and depth and iops > 0 and clat > 0:
        inflight = iops * clat / 1e6
        widen = spread_factor(spread)
        if inflight > depth * INFLIGHT_OVER * widen:
            reasons.append(
                f"{DISAGREE}: {_figure(iops)} IOPS at {_figure(clat)} us each is {inflight:.1f} I/Os at a time, more "
                f"than the job's {depth}"
            )
        elif inflight < depth * INFLIGHT_UNDER / widen and str(params.get("rw", "")) not in MIXED:
            reasons.append(
                f"{DISAGREE}: {_figure(iops)} IOPS at {_figure(clat)} us each is {_small(inflight)} I/Os at a time, the "
                f"job keeps {depth}"
            )
    size = block_bytes(params.get("bs"))
    if iops and throughput and size and iops > 0:
        expected = iops * size / 1e6
        if abs(throughput / expected - 1) > BLOCK_TOLERANCE:
            reasons.append(f"throughput {throughput:.1f} MB/s, IOPS x block size {expected:.1f} MB/s")
    return reasons


def _better(value: float, than: float, better: str) -> float | None:
    """How many times ``value`` is better than ``than`` (None when it is not, or no ratio)."""
    if value <= 0 or than <= 0:
        return None
    factor = value / than if better == "higher" else than / value
    return factor if factor > 1 else None


def implausible(table: pd.DataFrame, facts: pd.DataFrame | None) -> list[str]:
    """Per row of the comparison table, the reasons its numbers cannot be what they claim, joined
    by "; " ("" for none). ``facts``: the configurations' ``config``, ``machine`` and ``storage``
    (the engine's facts, or the per-sample frame)."""
    if table.empty:
        return []
    described: dict[str, tuple[str, str | None]] = {}
    if facts is not None and not facts.empty and {"config", "machine", "storage"} <= set(facts.columns):
        # the engine's facts hold a row per configuration and bundle; a per-sample frame, one per sample
        distinct = facts[["config", "machine", "storage"]].drop_duplicates()
        for config, machine, storage in distinct.itertuples(index=False):
            described.setdefault(str(config), (str(machine), storage if isinstance(storage, str) and storage else None))
    case_keys = list(zip(table["workload"], table["params"], table["case"], strict=True))
    # each side's medians per case: {(case key, configuration): {metric: median}}
    medians: dict[tuple[Any, str], dict[str, float]] = {}
    spreads: dict[tuple[Any, str], dict[str, float]] = {}
    nan = [float("nan")] * len(table)
    for key, metric, base, config, base_median, median, base_cv, cv, base_n, n in zip(
        case_keys,
        table["metric"],
        table["baseline"],
        table["config"],
        table["baseline_median"],
        table["median"],
        table["cv_baseline"] if "cv_baseline" in table else nan,
        table["cv"] if "cv" in table else nan,
        table["n_baseline"] if "n_baseline" in table else nan,
        table["n"] if "n" in table else nan,
        strict=True,
    ):
        medians.setdefault((key, str(config)), {})[str(metric)] = median
        medians.setdefault((key, str(base)), {})[str(metric)] = base_median
        spreads.setdefault((key, str(config)), {})[str(metric)] = cv
        spreads.setdefault((key, str(base)), {})[str(metric)] = base_cv
        # how many executions each side's median of this metric is over
        spreads[(key, str(config))][f"n:{metric}"] = n
        spreads[(key, str(base))][f"n:{metric}"] = base_n
    storage_cases = {key for (key, _config), metrics in medians.items() if IOPS in metrics and CLAT in metrics}

    side_cache: dict[tuple[Any, str], list[str]] = {}

    def side(key: Any, config: str) -> list[str]:
        if (key, config) in side_cache:
            return side_cache[(key, config)]
        params = _params(key[1])
        reasons = side_reasons(medians.get((key, config), {}), params, spreads.get((key, config)))
        machine, storage = described.get(config, (None, None))
        if _direct(params) and storage in BUFFERED_DIRECT:
            reasons.append(f"direct I/O served buffered on {storage}")
        if storage and storage != CEILING:
            reasons += _above_ceiling(key, config, machine, medians, described)
        side_cache[(key, config)] = reasons
        return reasons

    out = []
    for key, base, config in zip(case_keys, table["baseline"], table["config"], strict=True):
        if key not in storage_cases:
            out.append("")
            continue
        reasons = side(key, str(config)) + [f"baseline: {r}" for r in side(key, str(base))]
        out.append("; ".join(reasons))
    return out


def _above_ceiling(
    key: Any,
    config: str,
    machine: str | None,
    medians: dict[tuple[Any, str], dict[str, float]],
    described: dict[str, tuple[str, str | None]],
) -> list[str]:
    """The throughput of ``config`` more than CEILING_MARGIN above tmpfs's on the same machine."""
    mine = finite(medians.get((key, config), {}).get(THROUGHPUT))
    if mine is None or machine is None:
        return []
    for other, (other_machine, storage) in described.items():
        if storage != CEILING or other_machine != machine:
            continue
        ceiling = finite(medians.get((key, other), {}).get(THROUGHPUT))
        factor = _better(mine, ceiling, "higher") if ceiling else None
        if factor and factor > 1 + CEILING_MARGIN:
            return [f"{factor:.1f}x faster than tmpfs on this machine"]
    return []


def findings(table: pd.DataFrame) -> list:
    """One lint finding per configuration and reason, naming the rows it holds (workload, case and
    how many metrics)."""
    from ccbench.probe.lint import HIGH, make_finding

    if table is None or table.empty or "implausible" not in table:
        return []
    flagged = table[table["implausible"].astype(str) != ""]
    # {(configuration, kind of reason): {workload: {case: [metrics]}}}
    grouped: dict[tuple[str, str], dict[str, dict[str, list[str]]]] = {}
    for workload, case, metric, config, reasons in zip(
        flagged["workload"], flagged["case"], flagged["metric"], flagged["config"], flagged["implausible"], strict=True
    ):
        for reason in str(reasons).split("; "):
            workloads = grouped.setdefault((str(config), _kind(reason)), {})
            workloads.setdefault(str(workload), {}).setdefault(str(case), []).append(str(metric))
    out = []
    for (config, kind), workloads in grouped.items():
        count = sum(len(metrics) for cases in workloads.values() for metrics in cases.values())
        reasons = _reasons_of(flagged, config, kind)
        out.append(
            make_finding(
                "implausible",
                HIGH,
                f"{config}: {kind} in {count} rows ({'; '.join(_named(w, c) for w, c in workloads.items())}), "
                "not a measure of the layer",
                {config: {"rows": workloads, "reasons": reasons}},
                _why(kind, reasons) + ADVICE[kind],
            )
        )
    return out


def _named(workload: str, cases: dict[str, list[str]]) -> str:
    """ "fio 4k randread, 1m randread (5 metrics each)" """
    counts = {len(metrics) for metrics in cases.values()}
    each = ""
    if len(counts) == 1:
        (n,) = counts
        each = f" ({n} metric{'s' if n != 1 else ''}{' each' if len(cases) > 1 else ''})"
    names = ", ".join(case or "-" for case in cases)
    return f"{workload} {names}{each}"


#: what each kind of reason is, and what to do about it
ADVICE = {
    DISAGREE: "read the raw fio output of these jobs: a job whose I/O "
    "completes at submission (buffered) or that waits elsewhere does not measure the device",
    "throughput is not IOPS x block size": "check the block size the job ran with (raw fio output) and the units",
    "direct I/O served buffered": "compare page cache against page cache (direct = false on every variant), or "
    "use encryption the kernel serves with direct I/O (dm-crypt/LUKS, or fscrypt with inlinecrypt)",
    "faster than tmpfs": "a file system cannot be faster than memory on the same machine: a cache served these "
    "jobs; make the data set larger than the page cache or use direct I/O that the kernel honours",
}


def _why(kind: str, reasons: list[str]) -> str:
    """The mechanism behind a kind of reason, where one is known ("direct I/O served buffered")."""
    if kind != "direct I/O served buffered":
        return ""
    storages = [r.rsplit(" on ", 1)[-1] for r in reasons]
    return "".join(f"{BUFFERED_DIRECT[s]}; " for s in dict.fromkeys(storages) if s in BUFFERED_DIRECT)


def _kind(reason: str) -> str:
    text = reason.removeprefix("baseline: ")
    if text.startswith(DISAGREE):
        return DISAGREE
    if "IOPS x block size" in text:
        return "throughput is not IOPS x block size"
    if text.startswith("direct I/O served buffered"):
        return "direct I/O served buffered"
    return "faster than tmpfs"


def _reasons_of(flagged: pd.DataFrame, config: str, kind: str) -> list[str]:
    seen: list[str] = []
    for reasons in flagged.loc[flagged["config"] == config, "implausible"]:
        for reason in str(reasons).split("; "):
            if _kind(reason) == kind and reason not in seen:
                seen.append(reason)
    return seen[:8]
