"""Reading a study file: the TOML read, its parts checked one by one (ccbench.machines.studyparts) into
the study model (ccbench.machines.study). Above both, so the model and its parts import one way."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ccbench.machines import studyparts as parts
from ccbench.machines.study import NAME, ORDERS, Study, StudyError


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


def study_from_dict(document: dict[str, Any], source: Path) -> Study:
    where = parts.Where(source)
    allowed = {"name", "description", "plan", "image", "order", "rounds", "machine", "arm", "provider"}
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
    rounds = parts.integer(document.get("rounds", 3), where, "rounds", minimum=1)
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
    baseline = baselines[0] if baselines else parts.default_baseline(arms)
    return Study(
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
