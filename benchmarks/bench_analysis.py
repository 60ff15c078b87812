"""Time loading, `ccbench compare` and `ccbench report` on synthetic bundles, and what samples.parquet costs.

Writes synthetic bundles (3 machines, each with 2 storage variants: 6 configurations; realistic
shapes: fio cases with 5 metrics, notebooks with per-cell times, prime): ``--bundles`` of them
holding ``--samples`` in all (the machines repeat: 100 bundles are 33 or 34 runs of each, a
fleet's nightly shape). ``--series N`` writes the many-series shape instead: one configuration
per machine with N series each (a fleet's hosts times a plan's cases and metrics), 3 million
samples by default, every row of ``compare --json`` listing its raw directories. They are
written as an older ccbench wrote them, without samples.parquet, so the first compare converts
them into the cache (timed once per source, with an empty cache: "first compare"); the commands
then run as a user would, interleaved, on the cached files, also restricted to one process (-j 1)
unless ``--no-single-process``, with ``ccbench export`` (to Parquet) and ``ccbench history add``
(into a new store each time), and the median times and peak memory (of the main process) are
printed. Also printed: what writing samples.parquet costs a run
per 100,000 samples (CPU time) and its size beside the journal's. ``--data DIR`` keeps the bundles
(10 million samples: ``--samples 10000000 --bundles 100``, about 5 GB of journals).

The bundles are sealed as a run seals them (attestation.json, the digest list), since the
analysis reads only bundles that verify. ``--verify-cost`` adds a compare that skips that check
(patched out in its process, a measurement only: the command line has no way to skip it) beside
the same compare with it, both started the same way: what verifying on read costs a cached compare, the digests being remembered by file
identity after the first.

With ``--against REV`` every command also runs from another revision, interleaved with this
checkout's, and the ratios this/that are printed: a before/after measured side by side. REV is a
git revision of this repository (its ``src`` is extracted into a temporary directory) or the path
of another checkout's ``src`` directory.

    .venv/bin/python benchmarks/bench_analysis.py [--samples 1000000] [--bundles 10] [--rounds 3] [--against main]
        [--verify-cost] [--series 20000] [--only WORDS]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ccbench.bundle import BundleWriter
from ccbench.model import Sample

REPO = Path(__file__).resolve().parents[1]

MACHINES = [("plain-vm", "none", 1.0), ("sev-snp-vm", "sev-snp", 1.06), ("tdx-vm", "tdx", 1.09)]
STORAGE = [({"storage": "disk"}, 1.0), ({"storage": "encrypted", "storage_mechanism": "fscrypt"}, 1.4)]


def cases():
    for bs in ("4k", "64k", "1m"):
        for rw in ("randread", "randwrite", "read", "write"):
            for metric, unit, better in (
                ("throughput", "MB/s", "higher"),
                ("iops", "IOPS", "higher"),
                ("clat_mean", "us", "lower"),
                ("clat_p50", "us", "lower"),
                ("clat_p99", "us", "lower"),
            ):
                yield "fio", {"bs": bs, "rw": rw}, metric, unit, better
    for notebook in ("airline_delay", "credit_fraud", "app_store"):
        for cell in range(20):
            yield f"notebook-{notebook}", {"cell": cell}, "cell_s", "s", "lower"
        yield f"notebook-{notebook}", {}, "total_s", "s", "lower"
    yield "prime", {}, "time", "s", "lower"


#: the metrics of one case in the many-series shape (--series), fio's
SERIES_METRICS = (
    ("throughput", "MB/s", "higher"),
    ("iops", "IOPS", "higher"),
    ("clat_mean", "us", "lower"),
    ("clat_p50", "us", "lower"),
    ("clat_p99", "us", "lower"),
)
#: hosts a fleet's plan addresses in the many-series shape (the cases are spread over them)
SERIES_HOSTS = 100


def write_series_bundles(root: Path, total: int, series: int) -> list[Path]:
    """The many-series shape: one bundle per machine (one configuration each, so that each
    configuration other than the baseline gives one row per series), each holding ``series``
    distinct series (cases x metrics: a fleet's hosts times a plan's cases, 5 fio metrics each) with
    ``total / 3`` samples spread over them: one execution per repetition measures every case and
    metric (its raw directory ``raw/fio/storage-disk/rep-N``, as a run lays them out), so every row of
    ``compare --json`` lists every repetition's raw directory on both sides. The journal lines are
    written from one Sample's JSON per series (writing millions of Samples one by one would take
    minutes)."""
    rng = np.random.default_rng(1)
    cases = max(1, series // len(SERIES_METRICS))
    per_host = max(1, math.ceil(cases / SERIES_HOSTS))
    repetitions = max(3, total // (len(MACHINES) * cases * len(SERIES_METRICS)))
    paths = []
    for host, tee, machine_factor in MACHINES:
        writer = BundleWriter.create(root / host, _manifest(host, tee))
        writer.close()
        templates = []
        for number in range(cases):
            case = {"host": f"host-{number // per_host:03d}", "job": number % per_host}
            for metric, unit, better in SERIES_METRICS:
                line = Sample(
                    workload="fio",
                    kind="fio",
                    params=case,
                    variant={"storage": "disk"},
                    metric=metric,
                    unit=unit,
                    value=7777777.25,
                    better=better,
                    repetition=424242,
                    warmup=False,
                    timestamp="2026-01-01T00:00:00Z",
                    metadata={"case": case},
                    execution="@EXECUTION@",
                    raw="@RAW@",
                ).model_dump_json()
                line = line.replace("%", "%%").replace("7777777.25", "%r").replace("424242", "%d")
                templates.append((line.replace("@EXECUTION@", "%s").replace("@RAW@", "%s") + "\n", better))
        with open(writer.path / "samples.jsonl", "a") as journal:
            for rep in range(repetitions):
                execution, raw = f"fio|storage=disk|rep|{rep}", f"raw/fio/storage-disk/rep-{rep}"
                values = 100 * machine_factor * np.exp(rng.normal(0, 0.03, len(templates)))
                journal.writelines(
                    template % ((1e4 / value if better == "higher" else value), rep, execution, raw)
                    for (template, better), value in zip(templates, values.tolist(), strict=True)
                )
        paths.append(writer.path)
    return paths


def _manifest(host: str, tee: str) -> dict:
    return {
        "plan": {"name": "bench"},
        "environment": {
            "hostname": host,
            "tee": {"technology": tee, "evidence": []},
            "cpu": {"model": "bench"},
            "memory": {},
            "kernel": {"release": "6"},
            "storage": {"protection": "plain"},
        },
    }


def write_bundles(root: Path, total: int) -> list[Path]:
    rng = np.random.default_rng(1)
    groups = list(cases())
    configs = len(MACHINES) * len(STORAGE)
    per_group = max(3, total // (configs * len(groups)))
    paths = []
    for host, tee, machine_factor in MACHINES:
        writer = BundleWriter.create(root / host, _manifest(host, tee))
        batch = []
        for variant, storage_factor in STORAGE:
            for workload, case, metric, unit, better in groups:
                factor = machine_factor * (storage_factor if workload == "fio" else 1.0)
                values = 100 * factor * np.exp(rng.normal(0, 0.03, per_group))
                if better == "higher":
                    values = 1e4 / values
                for rep, value in enumerate(values):
                    batch.append(
                        Sample(
                            workload=workload,
                            kind=workload.split("-")[0],
                            params=case,
                            variant=variant,
                            metric=metric,
                            unit=unit,
                            value=float(value),
                            better=better,
                            repetition=rep,
                            warmup=False,
                            timestamp="2026-01-01T00:00:00Z",
                            metadata={"case": case},
                        )
                    )
        writer.append_samples(batch)
        writer.close()
        paths.append(writer.path)
    return paths


#: the store ``ccbench history add`` writes (a new one each run)
HISTORY_STORE = "history.duckdb"

#: CPU seconds (user + system) of each timed command's own process, by the command's argv; on a
#: shared machine a steadier measure than wall time of what a one-process command costs
CPU: dict[tuple[str, ...], list[float]] = {}


def timed(argv: list[str], src: str | None = None, cache: Path | None = None) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MiB) of the command's own process (os.wait4's rusage:
    a helper process it forks is not included); with ``src``, ccbench is imported from there; with
    ``cache``, that is the command's XDG_CACHE_HOME."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    if cache:
        env["XDG_CACHE_HOME"] = str(cache)
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            sys.exit(f"{' '.join(argv[:4])} failed: {stderr.read().decode(errors='replace').strip()[-500:]}")
    CPU.setdefault((src or "", *argv), []).append(usage.ru_utime + usage.ru_stime)
    return elapsed, usage.ru_maxrss / 1024


def source_of(against: str, root: Path) -> str:
    """The ``src`` directory to import the other revision from: a directory as given, or a git
    revision of this repository extracted under ``root``."""
    if Path(against).is_dir():
        return str(Path(against).resolve())
    target = root / "against"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", against, "src"], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"--against {against}: neither a directory nor a git revision ({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return str(target / "src")


EXTRA_SAMPLE = Sample(
    workload="prime",
    kind="prime",
    params={},
    variant={"storage": "disk"},
    metric="time",
    unit="s",
    value=0.0,
    repetition=999,
    warmup=False,
    timestamp="2026-01-01T00:00:00Z",
)


def make_bundles(root: Path, total: int, count: int, series: int = 0) -> list[Path]:
    """``count`` bundles of about ``total / count`` samples: three written (one per machine), the
    rest copies of them under new names, each with one sample of its own (writing millions of
    Samples one by one would take longer than the measurements). ``series``: the many-series shape
    (write_series_bundles)."""
    part = total * min(count, len(MACHINES)) // count
    if series:
        templates = write_series_bundles(root / "templates", part, series)
    else:
        templates = write_bundles(root / "templates", part)
    if count <= len(MACHINES):
        return templates[:count]
    paths = []
    for index in range(count):
        template = templates[index % len(templates)]
        path = root / "runs" / f"{template.name}-{index:03d}"
        shutil.copytree(template, path)
        # one sample more, its own: every copy's journal differs, so each is converted (the cache
        # is keyed by the journal's hash and would convert identical copies once)
        with open(path / "samples.jsonl", "a") as journal:
            journal.write(EXTRA_SAMPLE.model_copy(update={"value": float(index)}).model_dump_json() + "\n")
        paths.append(path)
    shutil.rmtree(root / "templates")
    return paths


def sealed(paths: list[Path]) -> list[Path]:
    """The bundles with their digest list written (no evidence), as a run ends."""
    from ccbench.attestation import finish_bundle

    for path in paths:
        finish_bundle(path, provider=None)
    return paths


def stored_bundles(data: Path, total: int, count: int, series: int = 0) -> list[Path]:
    """The bundles of this shape under ``data``, written there the first time (a "done" file marks a
    complete set: an interrupted write is redone)."""
    home = data / (f"{total}-samples-{count}-bundles" + (f"-{series}-series" if series else ""))
    done = home / "done"
    if not done.exists():
        shutil.rmtree(home, ignore_errors=True)
        paths = sealed(make_bundles(home, total, count, series))
        done.write_text("\n".join(str(p.relative_to(home)) for p in paths))
    return [home / line for line in done.read_text().splitlines()]


#: ``ccbench compare --json`` started the same way twice for --verify-cost: as shipped ("check") and
#: with the digest check patched out ("skip"), so that the two differ in nothing else
COMPARE_IN_PROCESS = """
import sys
from ccbench.attestation import onread
if sys.argv[1] == "skip":
    onread.problem_on_read = lambda bundle: None
from ccbench.cli import main
main(["compare", *sys.argv[2:], "--json"])
"""

#: the digest check alone, in one process, the digests already remembered: its median seconds
CHECK_ALONE = """
import statistics, sys, time
from ccbench.attestation.onread import check_before_reading
check_before_reading(sys.argv[2:])  # the first reads whatever is not remembered yet
seconds = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    check_before_reading(sys.argv[2:])
    seconds.append(time.perf_counter() - start)
print(statistics.median(seconds))
"""

WRITE_COST = """
import statistics, sys, tempfile, time
from pathlib import Path
try:
    from ccbench.bundle import columnar
except ImportError:  # a revision from before the bundle package (--against): results/columnar.py
    from ccbench.results import columnar
first, rounds = Path(sys.argv[1]), int(sys.argv[2])
seconds = []
with tempfile.TemporaryDirectory() as scratch:
    for _ in range(rounds):
        start = time.process_time()
        columnar.convert(first, Path(scratch) / "samples.parquet")
        seconds.append(time.process_time() - start)
print(statistics.median(seconds))
"""


#: the floors (issue 32), each one DuckDB query in a fresh process, as the commands start: the
#: journals read once by DuckDB's JSON reader (every field of the layout, as the conversion reads
#: them), and the converted samples.parquet files scanned once (every column of the layout's)
JOURNAL_FLOOR = """
import sys, duckdb
from ccbench.bundle import columnar_layout, journal_stream
columns = {n: journal_stream.DUCKDB_TYPES[k] for n, k in columnar_layout.SCALARS} | {
    n: "JSON" for n in columnar_layout.JSON_FIELDS
}
counts = ", ".join(f'count("{n}")' for n in columns)
files = sys.argv[1:]
duckdb.sql("SET enable_progress_bar = false")
duckdb.sql(
    f"SELECT {counts} FROM read_json({files!r}, format='newline_delimited', columns={journal_stream.struct_type(columns)})"
).fetchall()
"""
SCAN_FLOOR = """
import sys, duckdb
from ccbench.bundle import columnar
names = [n for n, _ in columnar.SCALARS] + [*columnar.JSON_FIELDS, columnar.EXTRA]
# every value read and decoded: a hash over all columns (count() of a column can be answered from
# the Parquet files' statistics without reading its pages, which made this floor mostly start-up)
hashed = "bit_xor(hash(" + ", ".join(f'"{n}"' for n in names) + "))"
duckdb.sql("SET enable_progress_bar = false")
duckdb.sql(f"SELECT {hashed} FROM read_parquet({sys.argv[1:]!r}, union_by_name = true)").fetchall()
"""


def parquet_costs(paths: list[Path], rounds: int, src: str) -> tuple[float, float, int]:
    """CPU seconds to write samples.parquet per 100,000 samples with the ccbench under ``src`` (median
    over ``rounds`` writes of the first bundle's, elsewhere; CPU time of every thread, since on a
    shared machine the wall time measures the others' load as well), and the bytes of the journals."""
    first = paths[0]
    rows = sum(1 for _ in open(first / "samples.jsonl", "rb"))
    env = dict(os.environ, PYTHONPATH=src)
    done = subprocess.run(
        [sys.executable, "-c", WRITE_COST, str(first), str(rounds)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"writing samples.parquet failed: {done.stderr.strip()[-500:]}")
    journal = sum((p / "samples.jsonl").stat().st_size for p in paths)
    # the last line: DuckDB may print its progress bar to stdout before it
    return float(done.stdout.strip().splitlines()[-1]) * 100_000 / rows, journal, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--samples", type=int, help="samples in all (default 100,000; with --series 3,000,000: 1M a bundle)"
    )
    parser.add_argument("--bundles", type=int, default=3, help="bundles the samples are spread over")
    parser.add_argument(
        "--series",
        type=int,
        default=0,
        metavar="N",
        help="the many-series shape: one configuration per machine, each with N distinct series "
        "(cases x 5 metrics over 100 hosts), every repetition's raw directory on each row "
        "(compare --json: N rows per configuration other than the baseline); times compare, "
        "export and history add, not the report",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each command, interleaved; the median is printed"
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="also run every command from this git revision (or src directory), interleaved, "
        "and print the ratios (this checkout / that one)",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        help="keep the generated bundles under DIR (written once per --samples/--bundles, reused later) "
        "instead of a temporary directory",
    )
    parser.add_argument(
        "--verify-cost",
        action="store_true",
        help="also run compare with the check of each bundle's digests patched out (the cost of verifying on read)",
    )
    parser.add_argument(
        "--no-floors",
        action="store_true",
        help="skip the floors (DuckDB reading the journals, scanning the Parquet files)",
    )
    parser.add_argument("--no-single-process", action="store_true", help="skip the -j 1 runs of compare and report")
    parser.add_argument(
        "--only", action="append", metavar="WORDS", help="run only the commands whose name contains WORDS (repeatable)"
    )
    args = parser.parse_args()
    if args.samples is None:
        args.samples = 3_000_000 if args.series else 100_000
    this_src = str(REPO / "src")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = stored_bundles(Path(args.data), args.samples, args.bundles, args.series) if args.data else None
        paths = paths or sealed(make_bundles(root, args.samples, args.bundles, args.series))
        count = sum(sum(1 for _ in open(p / "samples.jsonl", "rb")) for p in paths)
        cli = [sys.executable, "-m", "ccbench"]
        bundles = list(map(str, paths))
        commands = {
            "load only (python -c ccbench.load)": [sys.executable, "-c", f"import ccbench; ccbench.load({bundles!r})"],
            "ccbench compare --json": cli + ["compare", *bundles, "--json"],
            "ccbench compare --json -j 1": cli + ["compare", *bundles, "--json", "-j", "1"],
            "ccbench report -o report.html": cli + ["report", *bundles, "-o", str(root / "report.html")],
            "ccbench report -o report.html -j 1": cli
            + ["report", *bundles, "-o", str(root / "report.html"), "-j", "1"],
            "ccbench export -o samples.parquet": cli
            + ["export", *bundles, "-o", str(root / "export.parquet"), "--force"],
            # a new store each time (a bundle already in a store adds nothing): removed before each run
            "ccbench history add": cli + ["history", "add", *bundles, "--store", str(root / HISTORY_STORE)],
        }
        if args.series:
            commands = {name: argv for name, argv in commands.items() if "report" not in name and "load" not in name}
        if args.verify_cost:
            for jobs in ([], ["-j", "1"]):
                name = "ccbench compare --json" + (" -j 1" if jobs else "")
                for mode, suffix in (("check", " (verified)"), ("skip", " (not verified)")):
                    commands[name + suffix] = [sys.executable, "-c", COMPARE_IN_PROCESS, mode, *bundles, *jobs]
        if args.no_single_process:
            commands = {name: argv for name, argv in commands.items() if not name.endswith("-j 1")}
        first_compare = commands["ccbench compare --json"]
        if args.only:
            commands = {name: argv for name, argv in commands.items() if any(words in name for words in args.only)}
        sources = {"": this_src}
        if args.against:
            sources["against: "] = source_of(args.against, root)
        # the first compare converts every journal into an empty cache (each source its own, the
        # layouts may differ); the runs below read this checkout's cache
        first: dict[str, tuple[float, float]] = {}
        costs: dict[str, float] = {}
        for prefix, src in sources.items():
            first[prefix] = timed(first_compare, src, root / f"cache-{len(first)}")
            costs[prefix], journal_bytes, rows = parquet_costs(paths, args.rounds, src)
        cache = root / "cache-0"
        parquet_bytes = sum(p.stat().st_size for p in cache.rglob("*.parquet"))
        times: dict[str, list[float]] = {}
        peaks: dict[str, list[float]] = {}
        journals = [str(p / "samples.jsonl") for p in paths]
        floors = {
            FLOOR_JOURNAL: [sys.executable, "-c", JOURNAL_FLOOR, *journals],
            FLOOR_SCAN: [sys.executable, "-c", SCAN_FLOOR, *map(str, sorted(cache.rglob("*.parquet")))],
        }
        if not args.no_floors:
            first_floor = timed(floors[FLOOR_JOURNAL], this_src)  # beside the first compare, as near in time
        for _ in range(args.rounds):  # interleaved, so that drift on a shared machine hits all alike
            if not args.no_floors:
                for name, argv in floors.items():
                    elapsed, peak = timed(argv, this_src, cache)
                    times.setdefault(name, []).append(elapsed)
                    peaks.setdefault(name, []).append(peak)
            for name, argv in commands.items():
                for prefix, src in sources.items():
                    for store in root.glob(HISTORY_STORE + "*"):  # with DuckDB's write-ahead log
                        store.unlink()
                    elapsed, peak = timed(argv, src, cache)
                    times.setdefault(prefix + name, []).append(elapsed)
                    peaks.setdefault(prefix + name, []).append(peak)
        check_seconds = check_alone(paths, cache, max(args.rounds, 5)) if args.verify_cost else 0.0
    report(args, count, len(paths), times, peaks, commands)
    if not args.no_floors:
        floors_report(times, peaks, first[""], first_floor)
    if args.verify_cost:
        verify_cost(times, {name: CPU.get((this_src, *argv), []) for name, argv in commands.items()})
        print(f"the digest check alone, digests remembered: {check_seconds * 1000:.1f} ms")
    for prefix in sources:
        seconds, peak = first[prefix]
        other = f"  ratio {seconds / first['against: '][0]:.2f}" if prefix == "" and args.against else ""
        print(
            f"{prefix}first compare (converting every journal into an empty cache): {seconds:.2f} s, "
            f"peak {peak:.0f} MiB{other}"
        )
    print(
        f"samples.parquet: {parquet_bytes / 1e6:.1f} MB for {journal_bytes / 1e6:.1f} MB of journal "
        f"({parquet_bytes / journal_bytes:.3f} of it)"
    )
    for prefix, cost in costs.items():
        other = f"  ratio {cost / costs['against: ']:.2f}" if prefix == "" and args.against else ""
        print(f"{prefix}writing samples.parquet: {cost:.2f} CPU s per 100,000 samples (a bundle of {rows:,}){other}")


FLOOR_JOURNAL = "floor: DuckDB read_json of the journals"
FLOOR_SCAN = "floor: DuckDB scan of the samples.parquet files"


def floors_report(times: dict, peaks: dict, first: tuple[float, float], first_floor: tuple[float, float]) -> None:
    """The targets of issue 32 as ratios to their floors, measured in the same run."""
    median = {name: statistics.median(values) for name, values in times.items()}
    journal, scan = median[FLOOR_JOURNAL], median[FLOOR_SCAN]
    print(
        f"{FLOOR_JOURNAL}: {journal:.2f} s (median), {first_floor[0]:.2f} s beside the first compare; "
        f"first compare / floor: {first[0] / journal:.2f} (median floor), {first[0] / first_floor[0]:.2f} (beside it)"
    )
    print(f"{FLOOR_SCAN}: {scan:.2f} s, peak {statistics.median(peaks[FLOOR_SCAN]):.0f} MiB")
    for name in ("ccbench compare --json", "ccbench compare --json -j 1"):
        if name in median:
            print(f"{name} / scan floor: {median[name] / scan:.2f}")
    compare = median.get("ccbench compare --json")
    for name in ("ccbench report -o report.html", "ccbench report -o report.html -j 1"):
        if name in median and compare:
            print(f"{name} / compare: {median[name] / compare:.2f}")


def check_alone(paths: list[Path], cache: Path, rounds: int) -> float:
    """Median seconds of the digest check over ``paths`` in one process, the digests remembered in ``cache``."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), XDG_CACHE_HOME=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", CHECK_ALONE, str(rounds), *map(str, paths)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"the digest check failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.strip())


def verify_cost(times: dict, cpu: dict) -> None:
    """--verify-cost: each compare with the digest check beside the same without it, wall and CPU."""
    for name in ("ccbench compare --json", "ccbench compare --json -j 1"):
        for what, values, unit in (("wall", times, "s"), ("CPU of the main process", cpu, "CPU s")):
            verified, unverified = values.get(name + " (verified)"), values.get(name + " (not verified)")
            if not verified or not unverified or len(verified) != len(unverified):
                continue
            ratios = [a / b for a, b in zip(verified, unverified, strict=True)]
            print(
                f"verifying on read, {name}, {what}: {statistics.median(verified):.2f} vs "
                f"{statistics.median(unverified):.2f} {unit} without the check; median of per-round ratios "
                f"{statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)})"
            )


def report(args, count: int, bundles: int, times: dict, peaks: dict, commands: dict) -> None:
    median = {name: statistics.median(values) for name, values in times.items()}
    peak = {name: statistics.median(values) for name, values in peaks.items()}
    load = median.get("load only (python -c ccbench.load)")
    shape = f"3 configurations of {args.series:,} series each" if args.series else "6 configurations"
    print(f"samples: {count:,} in {bundles} bundles, {shape}; median of {args.rounds} interleaved runs")
    for name, value in median.items():
        if name.startswith("against: "):
            continue
        extra = "" if name.startswith("load") or not load else f"  ({value / load:.1f}x load)"
        print(f"{name:36s} {value:6.2f} s  peak {peak[name]:5.0f} MiB{extra}")
    if args.against:
        print(f"against {args.against} (same bundles, interleaved): this checkout / that one")
        for name in commands:
            other = median["against: " + name]
            print(
                f"{name:36s} {median[name]:6.2f} s vs {other:6.2f} s  ratio {median[name] / other:.2f}  "
                f"peak {peak[name]:5.0f} vs {peak['against: ' + name]:5.0f} MiB  "
                f"ratio {peak[name] / peak['against: ' + name]:.2f}"
            )
    if not args.no_single_process and not args.only and not args.series:
        compare, report_time = median["ccbench compare --json"], median["ccbench report -o report.html"]
        print(
            f"helper process (default) vs -j 1: compare {compare / median['ccbench compare --json -j 1']:.2f}x, "
            f"report {report_time / median['ccbench report -o report.html -j 1']:.2f}x"
        )


if __name__ == "__main__":
    main()
