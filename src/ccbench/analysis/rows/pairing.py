"""Which configuration a comparison row stands against, where it is not simply the baseline, and what
a row's pair measures (ccbench.analysis.rows.compare uses both).

**A cipher on a loop file stands against the same loop file without it.** ccbench cannot format a
user's disk, so it builds fscrypt and LUKS2 on a loop file (ccbench.variants.storage); the loop-file
stack costs something of its own (measured here: 20-42% on fio and durable YCSB), which a user who
encrypts their own disk does not pay. Where a group also measured ``ext4-loop`` (the same ext4 on a
loop file, no cipher) on the same machine, the encrypted variant's rows are compared against that
twin, so the storage-encryption layer's cost is its cipher's; ``ext4-loop``'s own rows against the
baseline carry the loop file's (its layer: "loop file, no cipher"). Without the twin the rows stand
against the baseline and the verdict says that the figure includes the loop file (loop_note).

**Mechanism twins** (twin_layers): a forced twin of the baseline (a plain VM booted with
``swiotlb=force``) differs from it in no protection layer; its rows measure that mechanism.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ccbench.analysis.labels import LOOP_CONTROL, loop_twin


def cipher_baselines(stats: pd.DataFrame) -> pd.DataFrame:
    """``stats`` (per group and configuration, with the group's ``baseline``) with each cipher on a
    loop file set against its loop twin where the group measured it (and the row is not the
    baseline itself)."""
    if stats.empty:
        return stats
    configs = stats["config"].astype(str).tolist()
    twin_of = {config: loop_twin(config) for config in set(configs)}  # per distinct configuration
    if not any(twin_of.values()):
        return stats
    present = set(zip(stats["group"].tolist(), configs, strict=True))
    twins = [twin_of[config] for config in configs]
    use = np.array(
        [
            twin is not None and (group, twin) in present and config != baseline
            for group, config, baseline, twin in zip(stats["group"], configs, stats["baseline"], twins, strict=True)
        ],
        dtype=bool,
    )
    if not use.any():
        return stats
    stats = stats.copy()
    stats.loc[use, "baseline"] = [twin for twin, chosen in zip(twins, use, strict=True) if chosen]
    return stats


def against_twin(table: pd.DataFrame) -> np.ndarray:
    """Per row of a comparison table, whether it sets a cipher on a loop file against its loop twin."""
    return np.array(
        [base == loop_twin(config) for base, config in zip(table["baseline"], table["config"], strict=True)],
        dtype=bool,
    )


def baselines(table: pd.DataFrame) -> tuple[list[str], str]:
    """The baselines a comparison table's rows stand against, in order, leaving out the loop twins
    of ciphers on loop files, and the words that say so ("" where no row stands against a twin)."""
    if table.empty:
        return [], ""
    twin = against_twin(table)
    main = list(dict.fromkeys(table["baseline"][~twin])) or list(dict.fromkeys(table["baseline"]))
    note = f" (a cipher on a loop file: against {LOOP_CONTROL})" if twin.any() else ""
    return main, note


def own_machines(table: pd.DataFrame) -> list[str]:
    """The machines (the first part of a configuration's label) whose rows stand against their own
    baseline while other rows stand against another machine's (ccbench.analysis.comparison adds a
    machine's own layers so), in order; none where no row crosses machines."""
    if table.empty:
        return []
    machine = {str(c): str(c).split(" / ")[0] for c in (*table["baseline"], *table["config"])}
    pairs = list(zip(table["baseline"].astype(str), table["config"].astype(str)))
    across = {machine[b] for b, c in pairs if machine[b] != machine[c]}
    return [m for m in dict.fromkeys(machine[b] for b, _ in pairs) if across and m not in across]


def own_note(table: pd.DataFrame) -> str:
    """ "; cvm also against its own" for the machines of own_machines ("" without one)."""
    own = own_machines(table)
    return f"; {', '.join(own)} also against {'their' if len(own) > 1 else 'its'} own" if own else ""


def _against_twins(rows: pd.DataFrame) -> tuple[list[str], dict[str, list[str]]]:
    """(the workloads whose ciphers on loop files all stand against their loop twin, the others with
    the other baselines they stand against), in order."""
    twins: dict[str, bool] = {}
    others: dict[str, list[str]] = {}
    for workload, base, config in rows[["workload", "baseline", "config"]].drop_duplicates().itertuples(index=False):
        twin = loop_twin(config)
        if twin is None:
            continue
        twins.setdefault(str(workload), True)
        if base != twin:
            twins[str(workload)] = False
            if str(base) not in others.setdefault(str(workload), []):
                others[str(workload)].append(str(base))
    return [w for w, alone in twins.items() if alone], others


def twin_baseline(rows: pd.DataFrame) -> str:
    """``ext4-loop`` where every cipher on a loop file among a layer's rows stands against its loop
    twin (the headline names it beside the layer), else ""."""
    twins, others = _against_twins(rows)
    return LOOP_CONTROL if twins and not others else ""


def loop_note(rows: pd.DataFrame) -> str:
    """For a storage-encryption layer's rows: what a cipher on a loop file among them stands
    against, per workload where they differ (its loop twin: the cipher alone; the baseline: the
    figure includes the loop file's own cost); "" without one."""
    twins, others = _against_twins(rows)
    alone = (
        f"measured against {LOOP_CONTROL}, the same loop file without the cipher: the cipher's cost alone "
        "(the loop file's own is under 'loop file, no cipher')"
    )
    if not others:
        return alone if twins else ""
    bases = list(dict.fromkeys(base for bases in others.values() for base in bases))
    including = (
        f"against {', '.join(bases)}: the figure includes the loop-file stack's own cost (add {LOOP_CONTROL} to the "
        "storage variants to tell them apart)"
    )
    if not twins:
        return f"a cipher on a loop file measured {including}"
    return (
        f"a cipher on a loop file: {', '.join(twins)} measured against {LOOP_CONTROL} (the cipher's cost alone); "
        f"{', '.join(others)} {including.replace('the figure includes', 'their figures include')}"
    )


def twin_layers(table: pd.DataFrame, facts: pd.DataFrame, machines: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """Rows where no protection layer differs but the compared configuration is a forced mechanism
    twin of the baseline (a plain VM booted with swiotlb=force against the same plain VM) measure that
    mechanism: their layer says so ("mechanism twin: bounce buffers"), unless the twin's virtio
    devices cannot bounce (no VIRTIO_F_ACCESS_PLATFORM: the lint's twin-bounces-nothing finding)."""
    if not machines or table.empty or not (table["layer"] == "none").any():
        return table
    from ccbench.analysis.rows.sides import config_sides
    from ccbench.analysis.rows.twins import TWIN_MARKERS, Twin, twin_mechanisms, vet_bounce_twin

    sides = config_sides(facts, machines)
    names = {}
    for base, config in set(zip(table["baseline"], table["config"], strict=True)):
        probes = [probe for _label, probe in sides.get(config, [])]
        if not probes:
            continue
        base_marks = set().union(*(twin_mechanisms(probe) for _label, probe in sides.get(base, [])))
        marks = set.intersection(*(twin_mechanisms(probe) for probe in probes)) - base_marks
        twins = {m: Twin(config, "forced") for m in marks if TWIN_MARKERS[m][1] == "forced"}
        if "bounce-buffers" in twins:
            twins, _refused = vet_bounce_twin(sides, base, twins, [])
        if twins:
            names[(base, config)] = "mechanism twin: " + " + ".join(m.replace("-", " ") for m in sorted(twins))
    if not names:
        return table
    keys = list(zip(table["baseline"], table["config"], strict=True))
    relabel = [names.get(key) if layer == "none" else None for key, layer in zip(keys, table["layer"], strict=True)]
    table = table.copy()
    table["layer"] = [new or old for new, old in zip(relabel, table["layer"], strict=True)]
    return table
