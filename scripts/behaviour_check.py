"""What ccbench prints on a fixed set of bundles, recorded once and checked byte for byte after a change
that must not change behaviour (a move of modules, a split of one; issue "One house").

    python scripts/behaviour_check.py --record FILE     # on the commit before the change
    python scripts/behaviour_check.py --check FILE      # after it: exit 1 naming the first differing line

The bundles, built afresh each time in a temporary directory: seed 000's published slice imported
(``tests/data/import/seed000-azure``, its Intel plain machine's files copied under seed 000's AMD labels,
as tests/test_baselines.py does), a local storage study (tests/bundles.py: three machines, a disk and an
encrypted variant, fio cases and a CPU workload) and a settled run (``run --settle``'s manifest, one
baseline, a variant that settled and one that did not). For each set: ``compare --json``,
``compare --summary``, ``report -o x.md`` and ``gate`` (the set's last bundle gated against the others);
their standard output, standard error, exit status and the report's text. Only the temporary
directory's path and ISO time stamps are normalised. The commands run as ``python -m ccbench`` from this
checkout's ``src`` (PYTHONPATH), each with a fresh ``XDG_CACHE_HOME``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "tests" / "data" / "import" / "seed000-azure"
SEED_TEES = {
    "TDX-Encrypted": "tdx",
    "TDX-Non-Encrypted": "tdx",
    "Intel-Non-TDX": "none",
    "AMD-Non-SEV": "none",
    "SEV-Non-Encrypted": "sev-snp",
}
#: ISO 8601 time stamps, extended (2026-12-02T13:33:18Z) and basic (a bundle's name: 20261202T133318Z)
TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?|\b\d{8}T\d{6}Z?")


class Session:
    def __init__(self, root: Path):
        self.root = root
        self.env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "XDG_CACHE_HOME": str(root / "cache")}
        for name in ("COLUMNS", "LINES"):
            self.env.pop(name, None)

    def ccbench(self, *args: object) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ccbench", *map(str, args)],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def normal(self, text: str) -> str:
        return TIME.sub("<time>", text.replace(str(self.root), "<dir>"))


def seed000(session: Session) -> list[Path]:
    source = session.root / "seed-source"
    shutil.copytree(SEED, source)
    for path in sorted(source.glob("Intel-Non-TDX_*")):
        for label in ("AMD-Non-SEV", "SEV-Non-Encrypted"):
            shutil.copy(path, source / path.name.replace("Intel-Non-TDX", label))
    out = session.root / "seed000"
    done = session.ccbench("import", "seed000", source, "--out", out, *(f"--tee={k}={v}" for k, v in SEED_TEES.items()))
    if done.returncode != 0:
        raise SystemExit(f"importing seed 000 failed: {done.stderr.strip()}")
    return sorted(out.iterdir())


def _bundles_module():
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO / "tests"))
    import bundles  # tests/bundles.py: the suite's bundle writer

    return bundles


def storage(session: Session) -> list[Path]:
    out = session.root / "storage"
    out.mkdir()
    return sorted(_bundles_module().write_bundles(out, per_case=6))


def settled(session: Session) -> list[Path]:
    bundles = _bundles_module()
    out = session.root / "settled"
    out.mkdir()
    values = {
        "storage=disk": [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99],
        "storage=encrypted": [1.30, 1.32, 1.29, 1.31, 1.28, 1.30, 1.33, 1.29],
        "storage=tmpfs": [1.00, 1.05, 0.96, 1.03, 0.98, 1.04, 0.97, 1.01],
    }
    stopped = {"storage=tmpfs": "max_repetitions"}
    first = bundles.write_settled(out, "settled-a", values, stopped_by=stopped)
    again = {k: [v * 1.01 for v in vs] for k, vs in values.items()}
    second = bundles.write_settled(out, "settled-b", again, stopped_by=stopped)
    return [first, second]


SETS = {"seed000": seed000, "storage": storage, "settled": settled}


def outputs(session: Session) -> dict[str, str]:
    recorded = {}
    for name, build in SETS.items():
        paths = build(session)
        report = session.root / f"{name}.md"
        runs = {
            "compare --json": ["compare", *paths, "--json"],
            "compare --summary": ["compare", *paths, "--summary"],
            "report -o x.md": ["report", *paths, "-o", report],
            "gate": ["gate", paths[-1], "--against", *paths[:-1]],
        }
        for label, args in runs.items():
            done = session.ccbench(*args)
            text = f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
            if label.startswith("report") and report.exists():
                text += f"--- {report.name}\n{report.read_text()}"
            recorded[f"{name}: {label}"] = session.normal(text)
    return recorded


def first_difference(before: dict[str, str], after: dict[str, str]) -> str | None:
    for key in sorted(set(before) | set(after)):
        if key not in after or key not in before:
            return f"{key}: recorded only {'before' if key in before else 'after'}"
        old, new = before[key].splitlines(), after[key].splitlines()
        for number, (a, b) in enumerate(zip(old, new, strict=False), 1):
            if a != b:
                return f"{key}: line {number} differs:\n  before: {a}\n  after:  {b}"
        if len(old) != len(new):
            return f"{key}: {len(old)} lines before, {len(new)} after (line {min(len(old), len(new)) + 1} on)"
        if before[key] != after[key]:
            return f"{key}: the same lines, different line endings"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, metavar="FILE", help="write the outputs here (JSON)")
    mode.add_argument("--check", type=Path, metavar="FILE", help="compare the outputs with this recording")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ccbench-behaviour-") as tmp:
        found = outputs(Session(Path(tmp)))
    if args.record:
        args.record.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(found)} outputs in {args.record}")
        return
    if not args.check.exists():
        raise SystemExit(f"{args.check}: no such recording; make one with --record on the commit before the change")
    difference = first_difference(json.loads(args.check.read_text()), found)
    if difference:
        print(f"behaviour changed: {difference}")
        raise SystemExit(1)
    print(f"the same: {len(found)} outputs byte for byte")


if __name__ == "__main__":
    main()
