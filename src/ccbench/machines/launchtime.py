"""Launch time against memory (docs/machines.md, section 12): each arm's time from QEMU's start to a
ready guest at every memory size of a study's sweep, and the verdict on it.

A measurement is one launch: the arm, its kind and twins, the memory and vCPUs, the seconds from
QEMU's start to the guest's ready line and SSH answering (monotonic clock, ``Guest.wait_ready``),
the accelerator, the firmware (path and digest) and the memory-acceptance setting. The study writes
each one to ``launch-times.jsonl`` (synced) before the next launch starts.

The verdict names **memory accepted at boot** as the cause only on evidence that it acted: launch
time grows with memory in a confidential arm and not in the plain arm(s) launched beside it. When it
grows in a plain arm too, something every arm shares grows with memory (the host's memory setup, the
guest's own page initialisation) and acceptance is not named. An arm "grows" when its median launch
time at the largest size exceeds the one at the smallest by more than ``GROWTH_FRACTION`` of it, more
than ``GROWTH_MIN_S`` and more than the spread of either size's launches."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

#: an arm grows with memory when its launch time at the largest size is this much longer (a share of
#: the time at the smallest size) ...
GROWTH_FRACTION = 0.15
#: ... and at least this many seconds longer (and more than the launches' own spread)
GROWTH_MIN_S = 0.5
CAUSE = "memory accepted at boot"


@dataclass(frozen=True)
class ArmGrowth:
    """One arm's launch times at its smallest and largest memory size."""

    arm: str
    kind: str
    twins: tuple[str, ...]
    small_mib: int
    large_mib: int
    small_s: float
    large_s: float
    spread_s: float
    launches: int

    @property
    def confidential(self) -> bool:
        return self.kind != "plain"

    @property
    def delta_s(self) -> float:
        return self.large_s - self.small_s

    @property
    def grows(self) -> bool:
        return self.delta_s > max(GROWTH_FRACTION * self.small_s, GROWTH_MIN_S, self.spread_s)

    def per_gib_s(self) -> float:
        return self.delta_s / ((self.large_mib - self.small_mib) / 1024)

    def says(self) -> str:
        how = "grows" if self.grows else "does not grow"
        return (
            f"{self.arm} ({self.kind}): {self.small_s:.1f} s at {_size(self.small_mib)}, {self.large_s:.1f} s at "
            f"{_size(self.large_mib)}: {how} with memory ({self.delta_s:+.1f} s, {self.per_gib_s():+.2f} s per GiB; "
            f"median of {self.launches} launch(es) a size, spread {self.spread_s:.1f} s)"
        )


@dataclass(frozen=True)
class LaunchVerdict:
    """The judged result: one line per arm, the cause (or None) and why."""

    arms: tuple[ArmGrowth, ...]
    cause: str | None
    reason: str
    #: arms that were rendered, not launched, with why (a confidential arm on a host without SNP or TDX)
    rendered_only: tuple[tuple[str, str], ...] = ()

    def lines(self) -> list[str]:
        out = [f"launch time against memory: {self.reason}"]
        out += [f"  {growth.says()}" for growth in self.arms]
        out += [f"  {arm}: rendered only, not launched here ({why})" for arm, why in self.rendered_only]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "reason": self.reason,
            "arms": [
                {
                    "arm": g.arm,
                    "kind": g.kind,
                    "twins": list(g.twins),
                    "small_mib": g.small_mib,
                    "large_mib": g.large_mib,
                    "small_s": round(g.small_s, 3),
                    "large_s": round(g.large_s, 3),
                    "spread_s": round(g.spread_s, 3),
                    "launches": g.launches,
                    "grows": g.grows,
                }
                for g in self.arms
            ],
            "rendered_only": [{"arm": arm, "why": why} for arm, why in self.rendered_only],
        }


def _size(mib: int) -> str:
    return f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB"


def growth(samples: list[dict[str, Any]]) -> list[ArmGrowth]:
    """Per arm (in the order first measured), its launch times at its smallest and largest size; an
    arm measured at fewer than two sizes has none."""
    by_arm: dict[str, dict[int, list[float]]] = {}
    meta: dict[str, dict[str, Any]] = {}
    for sample in samples:
        if sample.get("ready_s") is None:
            continue
        by_arm.setdefault(sample["arm"], {}).setdefault(int(sample["memory_mib"]), []).append(float(sample["ready_s"]))
        meta.setdefault(sample["arm"], sample)
    out = []
    for arm, sizes in by_arm.items():
        if len(sizes) < 2:
            continue
        small, large = min(sizes), max(sizes)
        spread = max(max(v) - min(v) for v in (sizes[small], sizes[large]))
        out.append(
            ArmGrowth(
                arm=arm,
                kind=meta[arm].get("kind", "plain"),
                twins=tuple(meta[arm].get("twins") or ()),
                small_mib=small,
                large_mib=large,
                small_s=statistics.median(sizes[small]),
                large_s=statistics.median(sizes[large]),
                spread_s=spread,
                launches=min(len(sizes[small]), len(sizes[large])),
            )
        )
    return out


def verdict(samples: list[dict[str, Any]], rendered_only: list[tuple[str, str]] | None = None) -> LaunchVerdict:
    """The cause rule over a sweep's launches: "memory accepted at boot" only when a confidential arm's
    launch time grows with memory and no plain arm's does (and a plain arm was measured)."""
    arms = growth(samples)
    rendered = tuple(rendered_only or ())
    plain = [g for g in arms if not g.confidential]
    cvm = [g for g in arms if g.confidential]
    growing = [g for g in cvm if g.grows]
    if not arms:
        reason = "no arm was launched at two memory sizes: nothing to judge"
        return LaunchVerdict((), None, reason, rendered)
    if not cvm:
        what = ", ".join(a for a, _w in rendered) or "none in the study"
        grown = [g.arm for g in plain if g.grows]
        shown = f"plain arm {', '.join(map(repr, grown))} grows" if grown else "no plain arm grows"
        reason = f"no confidential arm was launched (rendered only: {what}), so no cause is named; {shown} with memory"
        return LaunchVerdict(tuple(arms), None, reason, rendered)
    if not plain:
        reason = "no plain arm was launched beside the confidential ones, so growth cannot be told from the host's"
        return LaunchVerdict(tuple(arms), None, reason, rendered)
    if not growing:
        reason = (
            "launch time does not grow with memory in any confidential arm: memory acceptance is not a boot cost here"
        )
        return LaunchVerdict(tuple(arms), None, reason, rendered)
    plain_growing = [g for g in plain if g.grows]
    if plain_growing:
        reason = (
            f"launch time grows with memory in the plain arm {', '.join(repr(g.arm) for g in plain_growing)} too: "
            "not named memory accepted at boot (something every arm shares grows with memory)"
        )
        return LaunchVerdict(tuple(arms), None, reason, rendered)
    names = ", ".join(f"'{g.arm}' ({g.per_gib_s():+.2f} s per GiB)" for g in growing)
    reason = (
        f"{CAUSE}: launch time grows with memory in {names} and not in the plain arm "
        f"{', '.join(repr(g.arm) for g in plain)}"
    )
    return LaunchVerdict(tuple(arms), CAUSE, reason, rendered)
