"""Which configuration a comparison stands against: the least protected one (of all the bundles given,
or of one machine), a configuration or machine the user names (``--baseline``), and, per workload, the
baseline's own configuration (prime, with no storage variant, against "vm / no TEE" for "vm / no TEE /
disk"). ccbench.analysis.rows.compare and ccbench.analysis.comparison use them."""

from __future__ import annotations

import pandas as pd

from ccbench.analysis.labels import NO_PROTECTION, named_kind, own_path_parts, storage_kind
from ccbench.basics.errors import CCBenchError

#: storage and transport values that protect nothing (the unprotected side of a layer)
UNPROTECTED = {"disk", "plain"}


def protection_count(row: pd.Series) -> int:
    count = 0 if row["tee"] in ("none", None) else 1
    # by what the storage is, not its name: "disk (own path)" and a --storage-path directory found to be plain
    # ("tmpfs (own path, plain)") protect nothing
    storage = row["storage"]
    count += 0 if storage is None or pd.isna(storage) or storage_kind(str(storage)) == NO_PROTECTION else 1
    count += 0 if row["transport"] in (None, "plain") or pd.isna(row["transport"]) else 1
    return count


def configurations(frame: pd.DataFrame) -> list[str]:
    """Configurations in load order (first bundle first)."""
    return list(pd.unique(frame["config"]))  # order of appearance, without a Python loop over every sample


def default_baseline(frame: pd.DataFrame) -> str:
    """The configuration with the fewest active protection layers of all the bundles (least_protected:
    on a tie the first bundle's), never simply the first bundle's: a protected machine given first is not
    the baseline its unprotected twin would be."""
    configs = frame.drop_duplicates("config")
    counts = [protection_count(row) for _, row in configs.iterrows()]
    fewest = min(counts)
    first = configs["bundle"].iloc[counts.index(fewest)]  # the first bundle holding the least protected one
    return least_protected(frame, list(pd.unique(frame.loc[frame["bundle"] == first, "config"])))


def least_protected(frame: pd.DataFrame, configs: list[str]) -> str:
    """Of ``configs``, the one with the fewest active protection layers; on a tie the one naming the
    most layers ("vm / no TEE / disk" before "vm / no TEE": baseline_for_group maps it back for a
    workload without storage variants), then the one named unprotected ("disk (own path, plain)"
    before "tmpfs (own path, plain)": both plain directories, the user meant the disk as the
    baseline), then load order."""
    rows = frame[frame["config"].isin(configs)].drop_duplicates("config")
    ranked = sorted(
        rows.itertuples(index=False),
        key=lambda r: (
            protection_count(pd.Series(r._asdict())),
            -len(r.config.split(" / ")),
            _named_protected(r.storage),
            configs.index(r.config),
        ),
    )
    return ranked[0].config


def _named_protected(storage) -> bool:
    """Whether a storage label's name (not what it was found to be) says it protects something."""
    if storage is None or pd.isna(storage):
        return False
    return named_kind(own_path_parts(str(storage))[0]) != NO_PROTECTION


def resolve_baseline(frame: pd.DataFrame, baseline: str | None) -> str:
    configs = configurations(frame)
    if baseline is None:
        return default_baseline(frame)
    if baseline in configs:
        return baseline
    # a machine's label (or hostname) selects that machine: its least protected configuration, which
    # each workload then maps to its own ("first / no TEE" for prime, "first / no TEE / disk" for fio)
    machine = [m for m in pd.unique(frame["machine"]) if str(m).lower() == baseline.lower()]
    if len(machine) == 1:
        return least_protected(frame, list(pd.unique(frame.loc[frame["machine"] == machine[0], "config"])))
    matches = [c for c in configs if baseline.lower() in c.lower()]
    if len(matches) == 1:
        return matches[0]
    # "vm / no TEE" and "vm / no TEE / disk": one configuration seen by workloads with and without a
    # storage variant; the widest stands for both
    widest = max(matches, key=lambda c: len(c.split(" / ")), default=None)
    if widest and all(
        set(c.split(" / ")) <= set(widest.split(" / "))
        and set(widest.split(" / ")) - set(c.split(" / ")) <= UNPROTECTED
        for c in matches
    ):
        return widest
    hint = "; ".join(configs)
    if not matches:
        raise CCBenchError(f"--baseline {baseline!r}: no such configuration; the configurations are: {hint}")
    raise CCBenchError(
        f"--baseline {baseline!r} matches several configurations ({'; '.join(matches)}); give the full label"
    )


def baseline_for_group(baseline: str, configs) -> str | None:
    """The baseline itself, or for a workload that uses fewer layers (prime has no storage variant) the
    configuration whose parts are all in the baseline's ("vm / no TEE" for baseline "vm / no TEE / disk")."""
    if baseline in configs:
        return baseline
    parts = set(baseline.split(" / "))
    candidates = [c for c in configs if set(c.split(" / ")) <= parts]
    if candidates:
        return max(candidates, key=lambda c: len(c.split(" / ")))
    # or the other way round: the baseline names fewer layers, the group adds only unprotected ones
    extended = [c for c in configs if parts <= set(c.split(" / ")) and set(c.split(" / ")) - parts <= UNPROTECTED]
    if extended:
        return min(extended, key=lambda c: len(c.split(" / ")))
    # or both name other unprotected layers: "vm / no TEE / plain" (a transport workload) stands in for
    # "vm / no TEE / disk" (a storage workload's baseline): the same protections
    core = parts - UNPROTECTED
    same = [c for c in configs if set(c.split(" / ")) - UNPROTECTED == core]
    return same[0] if same else None
