"""Where the mechanisms workload finds ccmech (crates/ccmech), and which version it ran.

In order: the file ``$CCBENCH_CCMECH`` names, the checkout's build (``crates/target/release/ccmech``,
made by ``bash scripts/setup.sh --with mechanisms``), and the copy a fleet host's or a study guest's
wheelhouse installs (``<venv>/libexec/ccbench/ccmech``: ccbench.fleet.wheelhouse ships it, checked by
its SHA-256 on arrival, since those machines have no source checkout to build it in). The first that
is a file is used; when none is, the reason names all three.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

NAME = "ccmech"
ENV = "CCBENCH_CCMECH"
#: the checkout's build (this module is src/ccbench/workloads/mechanisms/binary.py)
CHECKOUT = Path(__file__).resolve().parents[4] / "crates" / "target" / "release" / NAME
INSTALL_HINT = "run 'bash scripts/setup.sh --with mechanisms'"


def shipped(prefix: str | Path | None = None) -> Path:
    """The copy the fleet's wheelhouse installs into a host's venv (``sys.prefix`` there)."""
    return Path(prefix if prefix is not None else sys.prefix) / "libexec" / "ccbench" / NAME


@dataclass(frozen=True)
class Found:
    path: Path
    #: which place it came from: "$CCBENCH_CCMECH", "checkout" or "shipped"
    source: str


class NotFound(Exception):
    """No ccmech in any of the three places (the message names them)."""


def find(
    environ: Mapping[str, str] | None = None, checkout: Path | None = None, prefix: str | Path | None = None
) -> Found:
    """The ccmech to run: $CCBENCH_CCMECH, else the checkout's build, else the shipped copy."""
    environ = os.environ if environ is None else environ
    checkout = CHECKOUT if checkout is None else checkout
    named = environ.get(ENV) or None
    places = [("$" + ENV, Path(named) if named else None), ("checkout", checkout), ("shipped", shipped(prefix))]
    for source, path in places:
        if path is not None and path.is_file():
            return Found(path, source)
    told = f"${ENV} names {named}, which is not a file" if named else f"${ENV} is unset"
    raise NotFound(
        f"{NAME} is not built: {told}; the checkout has no {checkout} ({INSTALL_HINT}); "
        f"no shipped copy at {shipped(prefix)} (ccbench fleet and machines studies install it there)"
    )


def version(path: Path) -> str:
    """``ccmech --version``'s version ("0.1.0"), or what stood in its way (a build older than the flag)."""
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({path} --version: {exc})"
    words = done.stdout.split()
    if done.returncode == 0 and len(words) == 2 and words[0] == NAME:
        return words[1]
    return f"unknown ({path} has no --version: built before ccmech had the flag)"
