"""The overhead model of seed 001: T = T_base * (1 + sum_i C_i * x_i), fitted by NNLS.

Layers (x_i = 1 when active): ``tee`` (any memory-encryption technology), ``storage:<variant>``
(encrypted mechanisms, tmpfs) and ``transport:<variant>`` (tls, securechannel). Written as
T = T_base + sum_i a_i x_i with a_i = T_base * C_i, the model is linear with non-negative unknowns,
which scipy.optimize.nnls fits. Metrics where higher is better are modelled on their reciprocal
(time per unit of work). Intervals: percentile bootstrap, resampling samples within each
configuration. A layer that never changes within a workload cannot be estimated there and is left
out; a layer that only ever changes together with another (e.g. TEE and machine) is confounded,
which the table notes. NNLS cannot give a negative C: a layer that makes things faster (tmpfs
often does) shows C = 0, and the comparison table shows the speed-up itself.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ccbench.analysis.compare import measured

BOOTSTRAP = 200


def layer_columns(frame: pd.DataFrame) -> pd.DataFrame:
    layers = pd.DataFrame(index=frame.index)
    layers["tee"] = (~frame["tee"].isin(["none"])).astype(float)
    storage = frame["storage"].fillna("disk")
    for value in sorted(set(storage) - {"disk"}):
        layers[f"storage:{value}"] = (storage == value).astype(float)
    transport = frame["transport"].fillna("plain")
    for value in sorted(set(transport) - {"plain"}):
        layers[f"transport:{value}"] = (transport == value).astype(float)
    return layers


def _fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    coefficients, _ = nnls(design, y)
    return coefficients


def fit_group(values: np.ndarray, layers: np.ndarray, configs: np.ndarray, rng: np.random.Generator,
              bootstrap: int = BOOTSTRAP) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """T_base, C_i, and their bootstrap 2.5/97.5 percentiles."""
    design = np.column_stack([np.ones(len(values)), layers])
    coefficients = _fit(design, values)
    base = coefficients[0]
    c = coefficients[1:] / base if base > 0 else np.full(layers.shape[1], np.nan)
    draws = []
    groups = [np.flatnonzero(configs == config) for config in np.unique(configs)]
    for _ in range(bootstrap):
        index = np.concatenate([rng.choice(g, size=len(g), replace=True) for g in groups])
        fitted = _fit(design[index], values[index])
        if fitted[0] > 0:
            draws.append(fitted[1:] / fitted[0])
    if draws:
        low, high = np.percentile(np.array(draws), [2.5, 97.5], axis=0)
    else:
        low = high = np.full(layers.shape[1], np.nan)
    return float(base), c, low, high


def overhead_model(frame: pd.DataFrame, bootstrap: int = BOOTSTRAP, seed: int = 0) -> pd.DataFrame:
    """One row per workload group (and a pooled row per metric direction) with C per layer."""
    data = measured(frame).copy()
    if data.empty:
        return pd.DataFrame()
    data = data[data["better"].isin(["lower", "higher"])]
    data["time_like"] = np.where(data["better"] == "higher", 1.0 / data["value"].replace(0, np.nan), data["value"])
    data = data.dropna(subset=["time_like"])
    layers = layer_columns(data)
    rng = np.random.default_rng(seed)
    rows = []
    pooled_y, pooled_x, pooled_configs = [], [], []
    for key, group in data.groupby(["workload", "params", "case", "metric"], sort=False):
        group_layers = layers.loc[group.index]
        varying = [c for c in group_layers.columns if group_layers[c].nunique() > 1]
        if not varying or group["config"].nunique() < 2:
            continue
        x = group_layers[varying].to_numpy()
        confounded = _confounded(group, group_layers[varying])
        base, c, low, high = fit_group(group["time_like"].to_numpy(), x, group["config"].to_numpy(), rng, bootstrap)
        row = {"workload": key[0], "case": key[2], "metric": key[3], "t_base": base, "n": len(group),
               "configs": group["config"].nunique(), "confounded": confounded}
        for name, value, lo, hi in zip(varying, c, low, high):
            row[f"C[{name}]"] = value
            row[f"C[{name}] low"] = lo
            row[f"C[{name}] high"] = hi
        rows.append(row)
        if base > 0:
            pooled_y.append(group["time_like"].to_numpy() / base)
            pooled_x.append(layers.loc[group.index])
            pooled_configs.append((key[0] + "|" + group["config"]).to_numpy())
    if not rows:
        return pd.DataFrame()
    if len(rows) > 1:
        x_all = pd.concat(pooled_x).fillna(0.0)
        varying = [c for c in x_all.columns if x_all[c].nunique() > 1]
        if varying:
            y = np.concatenate(pooled_y)
            base, c, low, high = fit_group(y, x_all[varying].to_numpy(), np.concatenate(pooled_configs), rng, bootstrap)
            row = {"workload": "(pooled)", "case": "", "metric": "all", "t_base": base, "n": len(y),
                   "configs": len(set(np.concatenate(pooled_configs))), "confounded": ""}
            for name, value, lo, hi in zip(varying, c, low, high):
                row[f"C[{name}]"], row[f"C[{name}] low"], row[f"C[{name}] high"] = value, lo, hi
            rows.append(row)
    return pd.DataFrame(rows)


def _confounded(group: pd.DataFrame, layers: pd.DataFrame) -> str:
    notes = []
    if "tee" in layers.columns:
        machines = group.groupby("machine")["tee"].nunique()
        if group["machine"].nunique() > 1 and (machines <= 1).all():
            notes.append("tee differs only across machines: C[tee] includes machine differences")
    columns = list(layers.columns)
    for i, a in enumerate(columns):
        for b in columns[i + 1:]:
            if (layers[a] == layers[b]).all():
                notes.append(f"{a} and {b} always change together")
    return "; ".join(notes)


def model_table(model: pd.DataFrame) -> pd.DataFrame:
    """The seed-001 style table: one C column per layer as 'value [low, high]'."""
    if model.empty:
        return model
    layers = sorted({c[2:-1] for c in model.columns if c.startswith("C[") and c.endswith("]")})
    rows = []
    for _, row in model.iterrows():
        out = {"workload": row["workload"], "case": row["case"], "metric": row["metric"], "T_base": row["t_base"]}
        for layer in layers:
            value = row.get(f"C[{layer}]")
            out[f"C_{layer}"] = "" if value is None or pd.isna(value) else (
                f"{value:.3f} [{row[f'C[{layer}] low']:.3f}, {row[f'C[{layer}] high']:.3f}]")
        out["note"] = row.get("confounded", "")
        rows.append(out)
    return pd.DataFrame(rows)


def params_text(params: str) -> str:
    try:
        return ", ".join(f"{k}={v}" for k, v in json.loads(params).items())
    except ValueError:
        return params
