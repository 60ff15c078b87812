"""Plans: what to run. TOML (docs/plan-format.md) or the seed-000 CSV plan format."""

from __future__ import annotations

import csv
import io
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ccbench.basics.errors import EnvironmentProblem, PlanError
from ccbench.formats import seed000
from ccbench.planning.plancheck import close_to, format_validation, validate_variants
from ccbench.variants import AXES
from ccbench.workloads import NOT_BUILT, REGISTRY, known_kinds, workload_class

PER_WORKLOAD_SETTINGS = (
    "repetitions",
    "warmup",
    "cooldown",
    "timeout",
    "variants",
    "precision",
    "detect",
    "settle",
    "settle_by",
    "max_repetitions",
    "max_time",
    "counters",
)


def parse_precision(value: str | float | int) -> float:
    """ "2%" or 0.02 -> 0.02. A bare number >= 1 is read as percent ("2" -> 0.02)."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*(%?)", text)
    if not match:
        raise ValueError(f"precision {value!r}: expected a percentage such as 2% or a fraction such as 0.02")
    number = float(match.group(1))
    fraction = number / 100 if match.group(2) or number >= 1 else number
    if not (0 < fraction < 1):
        raise ValueError(f"precision {value!r}: must be above 0% and below 100%")
    return fraction


def parse_duration(value: str | float | int) -> float:
    """ "90s", "30m", "2h", "1h30m" or a number of seconds -> seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        parts = re.findall(r"(\d+(?:\.\d*)?)\s*([hms]?)", text)
        if not parts or re.sub(r"(\d+(?:\.\d*)?)\s*([hms]?)", "", text).strip():
            raise ValueError(f"duration {value!r}: expected seconds or a form such as 90s, 30m, 2h, 1h30m")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1, "": 1}[unit] for n, unit in parts)
    if seconds <= 0:
        raise ValueError(f"duration {value!r}: must be positive")
    return seconds


class PrecisionSettings(BaseModel):
    """Precision on demand (docs/plan-format.md): after ``repetitions``, more interleaved rounds until
    the primary metric's 95% interval is within ``precision`` or a limit is reached."""

    #: target relative half-width of the 95% interval (0.02 = +-2%; the plan may write "2%"); None: a fixed count
    precision: float | None = None
    #: target minimum detectable effect (0.02: repeat until a 2% cost would be seen 4 times in 5; the
    #: plan may write "2%"); None: no such target. With both set, detect decides when to stop
    detect: float | None = None
    #: settle each case (a variant against the first): after ``repetitions``, rounds of the baseline
    #: and the unsettled variants until each variant's interval (the repeated one built for the round
    #: limit) calls a cost or gain, or puts every cost above this below it ("5%"); None: off. With precision or detect too, settle decides
    settle: float | None = None
    #: what settle stops on: each ``case`` (a variant stops when all its cases are settled), or each
    #: ``layer``'s headline (the mean of a variant's cases: ccbench.analysis.settling.layer_settle)
    settle_by: Literal["case", "layer"] = "case"
    #: the most repetitions per variant when precision is set (default: ccbench.analysis.statistics.precision's, 30)
    max_repetitions: int | None = Field(None, ge=1)
    #: the most seconds a workload's executions may take when precision is set ("30m", "2h", 90)
    max_time: float | None = None

    @field_validator("precision", "detect", "settle", mode="before")
    @classmethod
    def _precision(cls, value):
        if value is None:
            return None
        return parse_precision(value)

    @field_validator("max_time", mode="before")
    @classmethod
    def _max_time(cls, value):
        if value is None:
            return None
        return parse_duration(value)


class Defaults(PrecisionSettings):
    model_config = ConfigDict(extra="forbid")

    repetitions: int = Field(3, ge=1)
    warmup: int = Field(0, ge=0)
    cooldown: float = Field(2.0, ge=0)
    timeout: float = Field(1800.0, gt=0)
    variants: dict[str, list[str]] = Field(default_factory=dict)
    #: record the mechanism counters around each execution (ccbench.observe.counters)
    counters: bool = True

    @model_validator(mode="after")
    def _limits(self):
        if self.max_repetitions is not None and self.max_repetitions < self.repetitions:
            raise ValueError(f"max_repetitions ({self.max_repetitions}) is below repetitions ({self.repetitions})")
        return self


class WorkloadSpec(PrecisionSettings):
    model_config = ConfigDict(extra="forbid")

    kind: str
    name: str
    repetitions: int = Field(ge=1)
    warmup: int = Field(ge=0)
    cooldown: float = Field(ge=0)
    timeout: float = Field(gt=0)
    #: record the mechanism counters around each execution (ccbench.observe.counters)
    counters: bool = True
    #: axis -> values, only for the axes this kind honours
    variants: dict[str, list[str]] = Field(default_factory=dict)
    #: validated parameters (as JSON-able values)
    params: dict[str, Any] = Field(default_factory=dict)
    #: set when the plan names something this build cannot run
    skip_reason: str | None = None


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    source: str = ""
    defaults: Defaults = Field(default_factory=Defaults)
    axis_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: thresholds above which an execution counts as contended (ccbench.observe.interference.Thresholds); {} = defaults
    contention: dict[str, float | None] = Field(default_factory=dict)
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    #: seconds the whole study may take before settle rounds stop (``budget = "20m"``, ``--budget``); None: no limit
    budget: float | None = None
    #: how long the plan as written took on the project's 2-core machine ("13 min"): `ccbench plans` and
    #: the README's plans table say it from here (tests/test_readme.py holds them together); "" unmeasured
    time: str = ""

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, value):
        return None if value is None else parse_duration(value)

    def select(self, names: list[str]) -> Plan:
        known = [w.name for w in self.workloads]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise PlanError(
                f"--only {', '.join(unknown)}: no such workload in plan {self.name!r}; its workloads: {', '.join(known)}"
            )
        return self.model_copy(update={"workloads": [w for w in self.workloads if w.name in names]})

    def with_repetitions(self, repetitions: int) -> Plan:
        return self.model_copy(
            update={"workloads": [w.model_copy(update={"repetitions": repetitions}) for w in self.workloads]}
        )

    def without_counters(self) -> Plan:
        """Every workload without the mechanism counters (``--no-counters``)."""
        return self.model_copy(update={"workloads": [w.model_copy(update={"counters": False}) for w in self.workloads]})

    def with_precision(self, precision: str | float) -> Plan:
        """Every workload with this precision target (``--precision``)."""
        try:
            target = PrecisionSettings(precision=precision).precision
        except ValidationError as exc:
            raise PlanError(
                f"--precision {precision}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
            ) from None
        return self.model_copy(
            update={"workloads": [w.model_copy(update={"precision": target}) for w in self.workloads]}
        )

    def with_settle(self, settle: str | float | None, by: str | None = None) -> Plan:
        """Every workload settled at this target (``--settle``), case by case or ``by`` layer
        (``--settle-by``; without it each workload's own ``settle_by``)."""
        update: dict[str, Any] = {}
        if settle:
            try:
                update["settle"] = PrecisionSettings(settle=settle).settle
            except ValidationError as exc:
                raise PlanError(f"--settle {settle}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        if by:
            update["settle_by"] = by
            if not settle and not any(w.settle for w in self.workloads):
                # nothing settles, so the plan would run its repetitions as if the option were not given
                raise PlanError(
                    f"--settle-by {by}: nothing to settle: give --settle PERCENT too (e.g. --settle 5%), or a "
                    "plan whose workloads set settle"
                )
        return self.model_copy(update={"workloads": [w.model_copy(update=update) for w in self.workloads]})

    def with_budget(self, budget: str | float) -> Plan:
        """The whole study within this much time (``--budget``)."""
        try:
            return self.model_copy(update={"budget": parse_duration(budget)})
        except ValueError as exc:
            raise PlanError(f"--budget {budget}: {str(exc).removeprefix(f'duration {budget!r}: ')}") from None

    def with_detect(self, detect: str | float) -> Plan:
        """Every workload with this target minimum detectable effect (``--detect``)."""
        try:
            target = PrecisionSettings(detect=detect).detect
        except ValidationError as exc:
            raise PlanError(f"--detect {detect}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        return self.model_copy(update={"workloads": [w.model_copy(update={"detect": target}) for w in self.workloads]})


def build_workload(raw: dict[str, Any], defaults: Defaults, where: str) -> WorkloadSpec:
    raw = dict(raw)
    kind = raw.pop("kind", None)
    if not isinstance(kind, str):
        raise PlanError(f"{where}: every workload needs a 'kind' (one of: {', '.join(known_kinds())})")
    name = raw.pop("name", kind)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name):
        raise PlanError(f"{where}: name {name!r} must be letters, digits, '-', '_', '.' or '+'")
    settings = {key: raw.pop(key) for key in PER_WORKLOAD_SETTINGS if key in raw}
    explicit_variants = settings.pop("variants", None)
    merged = defaults.model_dump()
    merged.pop("variants")
    merged.update(settings)
    try:
        checked = Defaults(**merged)
    except ValidationError as exc:
        raise PlanError(f"{where} ({name}): {format_validation(exc)}") from None
    if kind not in REGISTRY:
        if kind in NOT_BUILT:
            return WorkloadSpec(
                kind=kind,
                name=name,
                params=raw,
                skip_reason=NOT_BUILT[kind],
                **checked.model_dump(exclude={"variants"}),
            )
        raise PlanError(f"{where}: unknown workload kind '{kind}'; known kinds: {', '.join(known_kinds())}")
    try:
        cls = workload_class(kind)
    except EnvironmentProblem as exc:
        # its module cannot be imported here (a component not installed): skip it, with the reason
        return WorkloadSpec(
            kind=kind, name=name, params=raw, skip_reason=str(exc), **checked.model_dump(exclude={"variants"})
        )
    try:
        params = cls.Params(**raw).model_dump(mode="json")
    except ValidationError as exc:
        known = ", ".join(cls.Params.model_fields) or "(none)"
        words = format_validation(exc, [*cls.Params.model_fields, *PER_WORKLOAD_SETTINGS])
        raise PlanError(f"{where} ({name}, kind {kind}): {words}; its parameters: {known}") from None
    variants: dict[str, list[str]] = {}
    if explicit_variants is not None:
        variants = validate_variants(explicit_variants, f"{where} ({name})")
        unsupported = [axis for axis in variants if axis not in cls.variant_axes]
        if unsupported:
            raise PlanError(
                f"{where} ({name}): kind '{kind}' does not use the {', '.join(unsupported)} axis; "
                f"it honours: {', '.join(sorted(cls.variant_axes)) or 'no variant axis'}"
            )
    else:
        variants = {axis: values for axis, values in defaults.variants.items() if axis in cls.variant_axes}
    # an honoured axis the plan does not mention runs on its default value (e.g. storage "disk"),
    # so every sample still says which protection layers were active
    for axis in sorted(cls.variant_axes):
        if axis in AXES and axis not in variants:
            variants[axis] = [AXES[axis].default_value]
    return WorkloadSpec(
        kind=kind, name=name, variants=variants, params=params, **checked.model_dump(exclude={"variants"})
    )


def plan_from_dict(document: dict[str, Any], source: str, default_name: str = "plan") -> Plan:
    allowed = {"name", "description", "time", "defaults", "workloads", "contention", "budget", *AXES}
    unknown = [key for key in document if key not in allowed]
    if unknown:
        raise PlanError(
            f"{source}: unknown top-level key(s) {', '.join(unknown)}{close_to(unknown, allowed)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    raw_defaults = document.get("defaults", {})
    if not isinstance(raw_defaults, dict):
        raise PlanError(f"{source}: [defaults] must be a table")
    raw_defaults = dict(raw_defaults)
    variants = raw_defaults.pop("variants", None)
    try:
        defaults = Defaults(**raw_defaults)
    except ValidationError as exc:
        raise PlanError(f"{source}: [defaults]: {format_validation(exc, Defaults.model_fields)}") from None
    if variants is not None:
        defaults.variants = validate_variants(variants, f"{source}: [defaults]")
    axis_options = {}
    for axis, axis_impl in AXES.items():
        if axis in document:
            try:
                axis_options[axis] = axis_impl.Options(**document[axis]).model_dump(mode="json")
            except (ValidationError, TypeError) as exc:
                known = axis_impl.Options.model_fields
                detail = format_validation(exc, known) if isinstance(exc, ValidationError) else str(exc)
                raise PlanError(f"{source}: [{axis}]: {detail}") from None
    contention = document.get("contention", {})
    if not isinstance(contention, dict):
        raise PlanError(f"{source}: [contention] must be a table like {{ others_cpus = 0.25 }}")
    try:
        from ccbench.observe.interference import Thresholds

        Thresholds.from_mapping(contention)
    except ValueError as exc:
        raise PlanError(f"{source}: [contention]: {exc}") from None
    raw_workloads = document.get("workloads", [])
    if not isinstance(raw_workloads, list) or not raw_workloads:
        raise PlanError(f"{source}: the plan lists no workloads; add [[workloads]] tables with a 'kind'")
    workloads = []
    for index, raw in enumerate(raw_workloads, start=1):
        if not isinstance(raw, dict):
            raise PlanError(f"{source}: workloads[{index}] must be a table")
        workloads.append(build_workload(raw, defaults, f"{source}: workloads[{index}]"))
    names = [w.name for w in workloads]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PlanError(f"{source}: workload name(s) used twice: {', '.join(duplicates)}; give each a distinct 'name'")
    name = document.get("name", default_name)
    description = document.get("description", "")
    if not all(isinstance(text, str) for text in (name, description, document.get("time", ""))):
        raise PlanError(f"{source}: 'name', 'description' and 'time' must be strings")
    try:
        budget = None if document.get("budget") is None else parse_duration(document["budget"])
    except ValueError as exc:
        raise PlanError(f"{source}: budget: {exc}") from None
    return Plan(
        budget=budget,
        name=name,
        description=description,
        time=document.get("time", ""),
        source=source,
        defaults=defaults,
        axis_options=axis_options,
        contention=contention,
        workloads=workloads,
    )


def load_toml(path: Path) -> Plan:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: TOML syntax error: {exc}; fix the plan file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path}: cannot read the plan ({exc})") from None
    return plan_from_dict(document, str(path), default_name=path.stem)


# ---- the seed-000 CSV plan ------------------------------------------------------------------

CSV_FIELDS = ("path_to_benchmark", "type", "datasets", "waittime_in_seconds", "num_executions")
#: seed 000 ran each fio job for about a minute
CSV_FIO_RUNTIME = 60
#: what the seed-000 runner did beyond its benchmark names (ccbench.formats.seed000)
CSV_EXTRA = {"fio": {"runtime": CSV_FIO_RUNTIME}, "notebook": {"size": "full"}}


def _csv_workload(fields: list[str], where: str, defaults: Defaults) -> dict[str, Any]:
    target, kind_column, datasets, wait, executions = (f.strip() for f in fields)
    try:
        cooldown = float(wait) if wait else defaults.cooldown
        repetitions = int(executions) if executions else 1
    except ValueError:
        raise PlanError(
            f"{where}: waittime_in_seconds and num_executions must be numbers, got {wait!r}, {executions!r}"
        ) from None
    base = {"cooldown": cooldown, "repetitions": repetitions, "warmup": 0}
    known = seed000.benchmark(target)
    if known is not None:
        named = {} if known.kind == "systeminfo" else {"name": known.name}
        return {"kind": known.kind, **named, **known.params, **CSV_EXTRA.get(known.kind, {}), **base}
    return {"kind": f"unknown:{target}", "name": seed000.safe_name(target) or "unknown", **base}


def load_csv(path: Path) -> Plan:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path}: cannot read the plan ({exc})") from None
    defaults = Defaults(warmup=0, repetitions=1)
    workloads = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = next(csv.reader(io.StringIO(stripped)))
        where = f"{path}:{number}"
        if len(fields) != len(CSV_FIELDS):
            raise PlanError(
                f"{where}: expected {len(CSV_FIELDS)} comma-separated fields ({','.join(CSV_FIELDS)}), "
                f"found {len(fields)}"
            )
        raw = _csv_workload(fields, where, defaults)
        if raw["kind"].startswith("unknown:"):
            workloads.append(
                WorkloadSpec(
                    kind=raw["kind"].split(":", 1)[1],
                    name=raw["name"],
                    repetitions=raw["repetitions"],
                    warmup=0,
                    cooldown=raw["cooldown"],
                    timeout=defaults.timeout,
                    skip_reason=f"'{fields[0]}' is not a benchmark ccbench knows (line {number})",
                )
            )
            continue
        if raw["kind"] not in REGISTRY:
            workloads.append(
                WorkloadSpec(
                    kind=raw["kind"],
                    name=raw["name"],
                    repetitions=raw["repetitions"],
                    warmup=0,
                    cooldown=raw["cooldown"],
                    timeout=defaults.timeout,
                    params={k: v for k, v in raw.items() if k not in ("kind", "name", *PER_WORKLOAD_SETTINGS)},
                    skip_reason=f"workload kind '{raw['kind']}' is not built in this version of ccbench",
                )
            )
            continue
        workloads.append(build_workload(raw, defaults, where))
    if not workloads:
        raise PlanError(f"{path}: the plan lists no benchmarks")
    names = [w.name for w in workloads]
    for index, spec in enumerate(workloads):
        if names.count(spec.name) > 1:
            spec.name = f"{spec.name}-{names[:index].count(spec.name) + 1}"
    return Plan(
        name=path.stem,
        description=f"seed-000 CSV plan {path.name}",
        source=str(path),
        defaults=defaults,
        workloads=workloads,
    )


# ---- finding plans --------------------------------------------------------------------------


def bundled_plans() -> dict[str, Path]:
    folder = resources.files("ccbench") / "plans"
    found = {}
    for entry in folder.iterdir():
        if entry.name.endswith((".toml", ".csv")):
            found[entry.name.rsplit(".", 1)[0]] = Path(str(entry))
    return dict(sorted(found.items()))


def load_plan(name_or_path: str) -> Plan:
    """The plan a file holds, or the bundled plan of that name: a plan file wins, but a directory
    never is one, so `quick` beside a ./quick folder (a run's output) is the bundled plan."""
    path, plans = Path(name_or_path), bundled_plans()
    if name_or_path in plans and not path.is_file():
        path = plans[name_or_path]
    elif not path.exists():
        import difflib

        close = difflib.get_close_matches(name_or_path, list(plans), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise PlanError(
            f"{name_or_path}: no such plan file, and not a bundled plan ({', '.join(plans)}); {hint}see 'ccbench plans'"
        )
    if path.is_dir():
        raise PlanError(f"{path}: is a directory; pass a .toml or .csv plan file, or a bundled plan's name")
    if path.suffix.lower() in (".csv", ".txt"):
        return load_csv(path)
    return load_toml(path)


def plan_summary(path: Path) -> str:
    try:
        plan = load_plan(str(path))
        measured = f" ({plan.time} as written, on the project's 2-core machine)" if plan.time else ""
        return (plan.description or f"{len(plan.workloads)} workloads") + measured
    except Exception as exc:  # one broken plan must not hide the others
        return f"(cannot load: {exc})"
