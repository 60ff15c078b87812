"""How a plan's mistakes are worded: pydantic's errors for a reader, an unknown name with the known
name it is closest to ("did you mean 'repetitions'"), and the check of a workload's variants table.
Kept apart from ccbench.planning.plan, which reads plans, so that each stays a size a reader can hold."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from ccbench.basics.errors import PlanError
from ccbench.variants import AXES


def close_to(unknown: Iterable[str], known: Iterable[str]) -> str:
    """ " (did you mean 'repetitions'?)" for the first unknown name that is a likely typo of a known
    one, "" where none is."""
    known = [str(name) for name in known]
    for name in unknown:
        match = difflib.get_close_matches(str(name), known, n=1, cutoff=0.75)
        if match:
            return f" (did you mean '{match[0]}'?)"
    return ""


def format_validation(exc: ValidationError, known: Iterable[str] = ()) -> str:
    """pydantic's errors as a reader needs them, an unknown name with the known one it is closest to."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown parameter '{where}'{close_to([str(error['loc'][-1])], known)}")
        elif error["type"] == "missing":
            parts.append(f"missing parameter '{where}'")
        else:
            parts.append(f"'{where}': {error['msg']}")
    return "; ".join(parts)


def validate_variants(variants: Any, where: str) -> dict[str, list[str]]:
    if not isinstance(variants, dict):
        raise PlanError(f'{where}: \'variants\' must be a table like {{ storage = ["disk", "tmpfs"] }}')
    result = {}
    for axis, values in variants.items():
        if axis not in AXES:
            raise PlanError(f"{where}: unknown variant axis '{axis}'; known: {', '.join(AXES)}")
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise PlanError(f"{where}: variants.{axis} must be a non-empty list of names")
        for value in values:
            try:
                AXES[axis].validate(value)
            except ValueError as exc:
                raise PlanError(f"{where}: {exc}") from None
        if len(set(values)) != len(values):
            raise PlanError(f"{where}: variants.{axis} lists a value twice")
        result[axis] = values
    return result
