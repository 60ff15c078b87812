"""An OpenFL workspace as ``fx`` would lay it out: the plan, the collaborator list, the data shards'
paths, the task runner (copied from ``workspace_files/``) and, for mutual TLS, the per-run PKI.

OpenFL runs from its own environment (``<venv>/federated``, made by
``scripts/setup.d/55-federated.sh``): the data preparation and ``fx plan initialize`` run there;
the PKI is made here, in ccbench's own process, with ``ccbench.basics.pki``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ccbench.basics.pki import RunCA
from ccbench.basics.procs import describe_exit
from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, WorkloadFailed, tail
from ccbench.workloads.federated.params import CLASSES, SHAPES, FederatedParams

WORKSPACE_FILES = Path(__file__).resolve().parent / "workspace_files"
#: RSA-3072 as OpenFL's own ``fx workspace certify`` makes; RunCA signs RSA keys with SHA-384
PKI_KEY_TYPE = "rsa-3072"
PKI_FACTS = {"key": "RSA-3072", "signature": "sha384"}


def openfl_python() -> Path:
    """OpenFL's interpreter: $CCBENCH_OPENFL_PYTHON, else <this venv>/federated/bin/python."""
    override = os.environ.get("CCBENCH_OPENFL_PYTHON")
    return Path(override) if override else Path(sys.prefix) / "federated" / "bin" / "python"


def openfl_environment() -> dict[str, str]:
    """The environment OpenFL's processes start with."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # ccbench's own sources are not OpenFL's
    env["PYTHONHASHSEED"] = "0"
    return env


def run_openfl(ctx: ExecutionContext, args: list[str], log_name: str, cwd: Path, timeout: float = 600) -> str:
    """Run a script or tool with OpenFL's interpreter; its output goes to raw/<log_name>.log."""
    result = subprocess.run(
        [str(openfl_python()), *args],
        cwd=cwd,
        env=openfl_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    (ctx.raw_dir / f"{log_name}.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        raise WorkloadFailed(
            f"{log_name} failed ({describe_exit(result.returncode)}): "
            f"{tail(result.stderr, 4, 600) or tail(result.stdout, 4, 600)}"
        )
    return result.stdout


def prepare_data(ctx: ExecutionContext, p: FederatedParams, source: str, root: Path, shards: Path) -> dict[str, Any]:
    """One IID shard per collaborator, made in OpenFL's environment; returns the shards' summary."""
    args = [
        str(WORKSPACE_FILES / "prepare_data.py"),
        "--dataset",
        p.dataset,
        "--source",
        source,
        "--collaborators",
        str(p.collaborators),
        "--train-per-collaborator",
        str(p.samples_per_collaborator),
        "--valid-per-collaborator",
        str(p.validation_per_collaborator),
        "--seed",
        str(p.seed),
        "--out",
        str(shards),
    ]
    if source == "official":
        args += ["--data-dir", str(Path(p.data_dir).expanduser())]
    root.mkdir(parents=True)
    data = json.loads(run_openfl(ctx, args, "prepare-data", cwd=root).strip().splitlines()[-1])
    return {k: data[k] for k in ("shards", "train_total", "valid_total", "shape")}


def build_workspace(
    ctx: ExecutionContext, p: FederatedParams, ws: Path, agg_addr: str, agg_port: int, use_tls: bool, names: list[str]
) -> Measurement:
    """Write the workspace and make the initial model with OpenFL's ``fx plan initialize``."""
    start = time.perf_counter()
    write_workspace(p, ws, agg_addr, agg_port, use_tls, names, ws.parent / "shards")
    run_openfl(
        ctx,
        [str(openfl_python().parent / "fx"), "plan", "initialize", "-a", agg_addr],
        "fx-plan-initialize",
        cwd=ws,
    )
    return Measurement(
        metric="workspace_time",
        unit="s",
        value=time.perf_counter() - start,
        metadata={"what": "ccbench harness: OpenFL workspace written and the initial model made by fx plan initialize"},
    )


def write_workspace(
    p: FederatedParams, ws: Path, agg_addr: str, agg_port: int, use_tls: bool, names: list[str], shards: Path
) -> None:
    (ws / "src").mkdir(parents=True)
    for name in ("taskrunner.py", "dataloader.py", "ccfl_model.py"):
        shutil.copy(WORKSPACE_FILES / name, ws / "src" / name)
    (ws / "src" / "__init__.py").write_text("")
    for sub in ("plan", "save", "logs", "local_state"):
        (ws / sub).mkdir(exist_ok=True)
    plan = {
        **_components(p),
        **_data_and_model(p, names),
        "network": _network(agg_addr, agg_port, use_tls),
        "tasks": _tasks(p),
    }
    # JSON is YAML: OpenFL's Plan reads these files with its YAML loader
    (ws / "plan" / "plan.yaml").write_text(json.dumps(plan, indent=1))
    (ws / "plan" / "cols.yaml").write_text(json.dumps({"collaborators": names}))
    (ws / "plan" / "data.yaml").write_text(
        "".join(f"{name},{shards / f'shard{i}.npz'}\n" for i, name in enumerate(names, start=1))
    )
    (ws / "plan" / "defaults").mkdir(exist_ok=True)


def _components(p: FederatedParams) -> dict[str, Any]:
    """The aggregator, collaborator, assigner, straggler policy and compression of the plan."""
    return {
        "aggregator": {
            "template": "openfl.component.Aggregator",
            "settings": {
                "init_state_path": "save/init.pbuf",
                "best_state_path": "save/best.pbuf",
                "last_state_path": "save/last.pbuf",
                "rounds_to_train": p.rounds,
                "db_store_rounds": 2,
                "write_logs": False,
                "persist_checkpoint": False,
            },
        },
        "collaborator": {
            "template": "openfl.component.Collaborator",
            "settings": {"db_store_rounds": 1, "use_delta_updates": False, "opt_treatment": "RESET"},
        },
        "assigner": {
            "template": "openfl.component.RandomGroupedAssigner",
            "settings": {
                "task_groups": [
                    {
                        "name": "learning",
                        "percentage": 1.0,
                        "tasks": ["aggregated_model_validation", "train", "locally_tuned_model_validation"],
                    }
                ]
            },
        },
        "straggler_handling_policy": {"template": "openfl.component.WaitForAllPolicy", "settings": {}},
        "compression_pipeline": {"template": "openfl.pipelines.NoCompressionPipeline", "settings": {}},
    }


def _data_and_model(p: FederatedParams, names: list[str]) -> dict[str, Any]:
    """ccbench's data loader and task runner (``workspace_files/``, copied into the workspace's src/)."""
    threads = p.torch_threads or max(1, (os.cpu_count() or 1) // max(1, len(names)))
    return {
        "data_loader": {
            "template": "src.dataloader.CCBenchShardLoader",
            "settings": {
                "batch_size": p.batch_size,
                "collaborator_count": len(names),
                "feature_shape": SHAPES[p.dataset],
                "num_classes": CLASSES[p.dataset],
            },
        },
        "task_runner": {
            "template": "src.taskrunner.CCBenchTaskRunner",
            "settings": {
                "model_name": p.model,
                "num_classes": CLASSES[p.dataset],
                "in_channels": SHAPES[p.dataset][0],
                "learning_rate": p.learning_rate,
                "torch_threads": threads,
                "device": "cpu",
            },
        },
    }


def _network(agg_addr: str, agg_port: int, use_tls: bool) -> dict[str, Any]:
    return {
        "template": "openfl.federation.Network",
        "settings": {
            "agg_addr": agg_addr,
            "agg_port": agg_port,
            "hash_salt": "auto",
            "use_tls": use_tls,
            "require_client_auth": use_tls,
            "cert_folder": "cert",
            "client_reconnect_interval": 1,
            "enable_atomic_connections": False,
            "transport_protocol": "grpc",
        },
    }


def _tasks(p: FederatedParams) -> dict[str, Any]:
    return {
        "aggregated_model_validation": {
            "function": "validate_task",
            "kwargs": {"apply": "global", "metrics": ["accuracy"]},
        },
        "locally_tuned_model_validation": {
            "function": "validate_task",
            "kwargs": {"apply": "local", "metrics": ["accuracy"]},
        },
        "train": {"function": "train_task", "kwargs": {"metrics": ["loss"], "epochs": p.epochs}},
        "settings": {},
    }


def write_pki(cert_dir: Path, aggregator: str, collaborators: list[str]) -> None:
    """A CA, the aggregator's and each collaborator's certificate, where OpenFL's plan looks for them:
    ``cert_chain.crt``, ``server/agg_<address>.{crt,key}``, ``client/col_<name>.{crt,key}``."""
    ca = RunCA.create("ccbench federation CA", key_type=PKI_KEY_TYPE)
    ca.write_certificate(cert_dir / "cert_chain.crt")
    # server and client authentication on the aggregator's certificate, as this workload's PKI always made it
    server = ca.issue(aggregator, names=[aggregator], server=True, client=True)
    stem = cert_dir / "server" / f"agg_{aggregator.lower()}"
    server.write(Path(f"{stem}.crt"), Path(f"{stem}.key"))  # with_suffix would cut agg_127.0.0.1 at its dots
    for name in collaborators:
        client = ca.issue(name, names=[name], server=False, client=True)
        client.write(cert_dir / "client" / f"col_{name}.crt", cert_dir / "client" / f"col_{name}.key")


def make_certificates(ws: Path, aggregator: str, collaborators: list[str], facts: dict[str, Any]) -> Measurement:
    """The per-run PKI of a TLS federation, timed (a harness step, never inside round times)."""
    start = time.perf_counter()
    write_pki(ws / "cert", aggregator, collaborators)
    seconds = time.perf_counter() - start
    facts["pki"] = dict(PKI_FACTS)
    return Measurement(
        metric="certificate_time",
        unit="s",
        value=seconds,
        metadata={
            "what": "ccbench harness: CA and one certificate per party",
            "key": PKI_FACTS["key"],
            # made in ccbench's own process now, so the whole step and the in-process time are one
            "in_process_s": seconds,
        },
    )
