"""Reading a study file: the TOML read, its parts checked one by one (ccbench.machines.studyparts) into
the study model (ccbench.machines.study). Above both, so the model and its parts import one way."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ccbench.machines import studyparts as parts
from ccbench.machines.study import NAME, ORDERS, Study, StudyError, Sweep


def load_study(path: str | Path) -> Study:
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{path}: TOML syntax error: {exc}; fix the study file") from None
    except IsADirectoryError:
        raise StudyError(f"{path}: is a directory; pass a study .toml file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"{path}: cannot read the study ({getattr(exc, 'strerror', None) or exc})") from None
    return study_from_dict(document, path)


def study_from_dict(document: dict[str, Any], source: Path, *, point: bool = False) -> Study:
    """The study a parsed file describes. ``point``: a sweep's point of a study already loaded (its
    arms passed the one-host check there, where its rounds decide it)."""
    where = parts.Where(source)
    allowed = {"name", "description", "plan", "image", "order", "rounds", "machine", "arm", "provider", "sweep"}
    parts.no_unknown(document, allowed, where, "the top level")
    parts.no_provider(document, where, "the top level")
    name = document.get("name", source.stem)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise where.error("name", f"{name!r} must be letters, digits, '-', '_', '.' or '+'")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise where.error("description", "must be a string")
    plan = parts.plan_of(document.get("plan"), where)
    image = parts.image_of(document.get("image"), where)
    order = document.get("order", "interleaved")
    if order not in ORDERS:
        raise where.error("order", f"{order!r} is not an order; use one of: {', '.join(ORDERS)}")
    launch_only = isinstance(document.get("sweep"), dict) and "memory" in document["sweep"]
    launch_only = launch_only and "vcpus" not in document["sweep"]
    rounds = parts.integer(document.get("rounds", 3), where, "rounds", minimum=0 if launch_only else 1)
    machine = parts.machine_of(document.get("machine", {}), where)
    raw_arms = document.get("arm")
    if not isinstance(raw_arms, list) or not raw_arms:
        raise where.error("arm", 'the study has no arms; add [[arm]] tables with a name and a kind ("plain", ...)')
    pool = parts.bounce_pool(raw_arms, machine)
    arms, baselines = [], []
    for index, raw in enumerate(raw_arms, start=1):
        arm, is_baseline = parts.arm_of(raw, index, where, machine, image, pool)
        arms.append(arm)
        if is_baseline:
            baselines.append(arm.name)
    names = [a.name for a in arms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise where.error("arm.name", f"{', '.join(twice)} used twice; give each arm a distinct name")
    if len(baselines) > 1:
        raise where.error(
            "arm.baseline", f"{', '.join(baselines)} are all marked; mark at most one arm baseline = true"
        )
    parts.check_machine_for_arms(machine, arms, where)
    if rounds and not point:
        one_host(arms, where)
    baseline = baselines[0] if baselines else parts.default_baseline(arms)
    study = Study(
        name=name,
        plan=plan,
        image=image,
        order=order,
        rounds=rounds,
        machine=machine,
        arms=tuple(arms),
        baseline=baseline,
        source=source,
        description=description,
    )
    if "sweep" in document:
        study = replace(study, sweep=sweep_of(document, study, where))
    return study


def one_host(arms: list, where: parts.Where) -> None:
    """A study runs its plan in every arm on one host, and one host is AMD (SEV-SNP) or Intel (TDX),
    never both: a study with arms of both kinds is refused before anything starts. A launch-time study
    (rounds = 0) is not: it renders the arms this host cannot launch (docs/machines.md, section 12)."""
    by_kind = {kind: [a.name for a in arms if a.kind == kind] for kind in ("sev-snp", "tdx")}
    if all(by_kind.values()):
        raise where.error(
            "arm.kind",
            f"sev-snp arms ({', '.join(by_kind['sev-snp'])}) and tdx arms ({', '.join(by_kind['tdx'])}) "
            "cannot run on one host (SEV-SNP needs an AMD host, TDX an Intel one); split them into two "
            "studies, each with its own plain arms",
        )


SWEEP_KEYS = {"memory", "vcpus", "launches"}


def sweep_of(document: dict[str, Any], study: Study, where: parts.Where) -> Sweep:
    """``[sweep]``: memory sizes each arm's launch is timed at, vCPU counts the plan runs at, and the
    study at each point (this file again with that memory or vCPU count)."""
    table = document["sweep"]
    if not isinstance(table, dict):
        raise where.error("sweep", 'must be a table: [sweep] with memory = ["512M", "2G"] and/or vcpus = [2, 4]')
    parts.no_unknown(table, SWEEP_KEYS, where, "[sweep]")
    if "memory" not in table and "vcpus" not in table:
        raise where.error("sweep", 'sweeps nothing; add memory = ["512M", "2G"] or vcpus = [2, 4]')
    memory = _distinct(table, "memory", lambda v, k: parts.memory_mib(v, where, k), where)
    vcpus = _distinct(table, "vcpus", lambda v, k: parts.integer(v, where, k, minimum=1), where)
    if "launches" in table and not memory:
        raise where.error("sweep.launches", "counts launches at each memory size; add sweep.memory or drop it")
    launches = parts.integer(table.get("launches", 1), where, "sweep.launches", minimum=1)
    machine = document.get("machine") or {}
    if vcpus and "pin" in machine:
        raise where.error(
            "sweep.vcpus", "machine.pin names one host CPU per vCPU, and the sweep changes their number; drop pin"
        )
    if vcpus and "cores" in machine:
        raise where.error(
            "sweep.vcpus", "machine.cores is fixed, and the sweep changes the vCPUs; drop cores (it follows vcpus)"
        )
    return Sweep(
        memory_mib=memory,
        vcpus=vcpus,
        launches=launches,
        memory_points=tuple(_point(document, where, "memory", m, f"{m} MiB") for m in memory),
        vcpu_points=tuple(_point(document, where, "vcpus", n, f"{n} vCPUs") for n in vcpus),
    )


def _distinct(table: dict[str, Any], key: str, read, where: parts.Where) -> tuple[int, ...]:
    if key not in table:
        return ()
    values = table[key]
    if not isinstance(values, list) or len(values) < 2:
        raise where.error(f"sweep.{key}", f"{values!r}: a sweep needs a list of two or more values")
    read_values = [read(v, f"sweep.{key}") for v in values]
    if len(set(read_values)) != len(read_values):
        raise where.error(f"sweep.{key}", f"{values!r} lists a value twice; give each once")
    return tuple(sorted(read_values))


def _point(document: dict[str, Any], where: parts.Where, key: str, value: int, shown: str) -> Study:
    """The study at one point of the sweep: the same file with [machine]'s memory or vcpus set."""
    point = {k: v for k, v in document.items() if k != "sweep"}
    point["machine"] = {**(document.get("machine") or {}), key: value}
    point["rounds"] = max(int(document.get("rounds", 3)), 1)
    try:
        return study_from_dict(point, where.source, point=True)
    except StudyError as exc:
        said = str(exc).removeprefix(f"{where.source}: ")
        raise where.error(f"sweep.{key}", f"at {shown}: {said}") from None
