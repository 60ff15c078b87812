"""The settle intervals under noise that is not independent and normal (benchmarks/sim_sequential.py
--noise; docs/analysis.md "Settling each case").

Four noise models of the paired log costs, each scaled to the paired spread ``sd``:
- normal;
- skewed: centred log-normal residuals (shape 1: skewness 6.2, the bulk below the mean and a long tail
  above it);
- autocorrelated: AR(1), rho 0.5 (a drift the pairing does not cancel);
- bundle: residuals drawn with replacement from real bundles' paired values (each case's paired log
  costs about their mean, widened by sqrt(n / (n - 1)); the cases pooled, so the pool is a scale mixture).

Each is tried two ways:
- on the paired values ("tied to the label"): the noise belongs to the variant, a pessimistic reading
  in which an A/A pair can still be skewed or autocorrelated;
- on the executions in run order with the order within each round drawn ("order drawn"): what the
  runner does (ccbench.run.schedule.round_order); under no cost the sign of each paired value is then a
  fair coin, whatever the noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

MODELS = ("normal", "skewed", "AR(1) 0.5", "bundle")
SKEW_SHAPE = 1.0
RHO = 0.5


def bundle_residuals(paths: Iterable[Path]) -> np.ndarray:
    """The pooled paired residuals of every case (metric, params, variant against the workload's
    first variant) with at least 3 paired repetitions in these bundles."""
    from ccbench.bundle.reader import read_bundle
    from ccbench.model import ExecutionKey

    pooled: list[float] = []
    for path in paths:
        values: dict[tuple, dict[str, dict[int, float]]] = {}
        first: dict[str, str] = {}
        for chunk in read_bundle(path).sample_chunks():
            for s in chunk:
                if s.get("warmup") or not s.get("execution") or not s["value"] > 0:
                    continue
                variant = ExecutionKey.parse(s["execution"]).variant
                first.setdefault(s["workload"], variant)
                series = (s["workload"], s["metric"], repr(sorted(s["params"].items())))
                values.setdefault(series, {}).setdefault(variant, {})[s["repetition"]] = s["value"]
        for series, per_variant in values.items():
            base = per_variant.get(first[series[0]], {})
            for variant, mine in per_variant.items():
                rounds = sorted(set(mine) & set(base))
                if variant == first[series[0]] or len(rounds) < 3:
                    continue
                paired = np.log([mine[r] / base[r] for r in rounds])
                pooled.extend((paired - paired.mean()) * math.sqrt(len(paired) / (len(paired) - 1)))
    return np.asarray(pooled)


def draw(model: str, rng: np.random.Generator, shape: tuple[int, int], pool: np.ndarray | None) -> np.ndarray:
    """Noise of unit standard deviation, one row a case, in time order along the row."""
    if model == "normal":
        return rng.standard_normal(shape)
    if model == "skewed":
        k = SKEW_SHAPE
        return (np.exp(k * rng.standard_normal(shape)) - math.exp(k * k / 2)) / math.sqrt(
            (math.exp(k * k) - 1) * math.exp(k * k)
        )
    if model == "AR(1) 0.5":
        shocks = rng.standard_normal(shape) * math.sqrt(1 - RHO**2)
        out = np.empty(shape)
        out[:, 0] = rng.standard_normal(shape[0])
        for i in range(1, shape[1]):
            out[:, i] = RHO * out[:, i - 1] + shocks[:, i]
        return out
    if model == "bundle" and pool is not None and len(pool):
        return rng.choice(pool, shape) / pool.std()
    raise ValueError(f"no noise model {model!r}")


def paired_noise(
    model: str, order_drawn: bool, rng: np.random.Generator, trials: int, rounds: int, sd: float, pool=None
) -> np.ndarray:
    """Paired values of spread ``sd`` with no cost: the model's noise on the paired values, or on the
    executions (two a round, in run order) with each round's order drawn."""
    if not order_drawn:
        return sd * draw(model, rng, (trials, rounds), pool)
    runs = draw(model, rng, (trials, 2 * rounds), pool) * sd / math.sqrt(2)
    signs = rng.choice([-1.0, 1.0], (trials, rounds))
    return signs * (runs[:, 1::2] - runs[:, 0::2])


Interval = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def aa_error(lows: np.ndarray, highs: np.ndarray, first: int = 3) -> float:
    """The share of A/A cases whose interval ever excludes 0 at the looks first.. (the columns)."""
    return float(((lows > 0) | (highs < 0))[:, first - 1 :].any(axis=1).mean())


def settle_path(lows: np.ndarray, highs: np.ndarray, target: float, first: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Per case the answer at its first settled look (0 none, 1 cost, -1 gain, 2 no cost above) and
    the rounds it ran (the last column where none)."""
    answer = np.zeros(lows.shape, dtype=int)
    answer[highs < math.log1p(target)] = 2
    answer[highs < 0] = -1
    answer[lows > 0] = 1
    answer[:, : first - 1] = 0
    settled = answer != 0
    at = np.where(settled.any(axis=1), settled.argmax(axis=1), lows.shape[1] - 1)
    return answer[np.arange(len(lows)), at], at + 1
