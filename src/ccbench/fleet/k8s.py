"""Kubernetes manifests for running ccbench in (confidential) containers: rendered here, not run.

``ccbench fleet k8s`` renders one Job per RuntimeClass (``runc``, ``kata-qemu-snp``,
``kata-qemu-tdx``, ...) that runs a plan in an image and keeps its bundle on a volume claim,
plus the RuntimeClass objects and GATHERING.md, from the object helpers of ``ccbench.basics.kube``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError
from ccbench.basics.kube import (
    DNS_LABEL,
    ManifestError,
    config_map,
    container,
    job,
    k8s_name,
    labels,
    metadata,
    namespace,
    pod_spec,
    runtime_class,
    validate_objects,
    volume_claim,
    volume_mount,
    write_manifests,
)

GATHERING = """# Gathering the bundles of `{plan}` from Kubernetes

Rendered by `ccbench fleet k8s` for the runtime classes {classes}; nothing here was run by
ccbench (no cluster is reachable where it was rendered). Apply, wait, copy out, compare:

```sh
kubectl apply -f {directory}/runtimeclasses.yaml   # skip classes your cluster already defines
kubectl apply -f {directory}/namespace.yaml
kubectl apply -f {directory}/jobs.yaml
kubectl -n {namespace} wait --for=condition=complete --timeout=24h job -l app.kubernetes.io/part-of=ccbench
```

Each Job writes its bundle to its own volume claim (`results-<class>`), mounted at `/results`.
The Job's pod is finished by then, so start the small reader pods (plain `runc`, no confidential
guest needed to read files) and copy each bundle out:

```sh
kubectl apply -f {directory}/gather.yaml
{copy_lines}
kubectl delete -f {directory}/gather.yaml
```

Then compare with the plain runtime as the baseline:

```sh
ccbench compare bundles/{baseline}/* {others} {label_args}
ccbench report  bundles/{baseline}/* {others} {label_args} -o report.html
```

Notes:
- Requests equal limits on every container ({cpu} CPU, {memory} memory): Kata sizes the guest VM
  from them. A Kata pod also pays the RuntimeClass's pod overhead, if your cluster sets one.
- The runtime classes must exist on the nodes (e.g. the Kata Containers or Confidential
  Containers operator installs `kata-qemu-snp` and `kata-qemu-tdx`); `runc` is the default handler
  of containerd and CRI-O.
- The image must contain ccbench (`pip install ccbench` from a checkout's wheel) and the tools the
  plan needs; a missing tool makes that workload skip with the reason, as everywhere.
- The pod's probe records what it saw from inside the guest (TEE, memory encryption), so the
  bundle says whether the class delivered a confidential guest.
"""


def render_plan_jobs(
    plan: str,
    *,
    image: str,
    runtime_classes: list[str],
    out: Path,
    namespace_name: str = "ccbench",
    cpu: str = "2",
    memory: str = "4Gi",
    storage: str = "5Gi",
    storage_class: str | None = None,
    handlers: dict[str, str] | None = None,
    bad_handlers: list[str] | None = None,
) -> list[Path]:
    """Render the Jobs for ``plan`` (a bundled plan name or a plan file) into ``out``; returns the
    files written. Every object is validated (strict, offline) before anything is written."""
    from ccbench.planning.plan import load_plan

    if bad_handlers:
        raise ManifestError(f"--handler {bad_handlers[0]!r}: expected CLASS=HANDLER")
    if not runtime_classes:
        raise ManifestError("give at least one --runtime-class (e.g. runc, kata-qemu-snp, kata-qemu-tdx)")
    loaded = load_plan(plan)  # a broken plan is exit 2 before anything is written
    handlers = handlers or {}
    classes = _runtime_class_names(runtime_classes, handlers)
    plan_path = Path(plan)
    plan_file = plan_path.is_file()
    ns = k8s_name(namespace_name)
    objects_ns = [namespace(ns)]
    if plan_file:
        objects_ns.append(config_map("ccbench-plan", ns, {f"plan{plan_path.suffix}": plan_path.read_text()}))
    plan_argument = f"/plan/plan{plan_path.suffix}" if plan_file else plan
    jobs, gather, claims = [], [], []
    for name in classes:
        suffix = k8s_name(name, max_length=40)
        claim = f"results-{suffix}"
        claims.append(volume_claim(claim, ns, storage, storage_class))
        jobs.append(
            _plan_job(
                name,
                ns,
                image,
                plan_argument,
                claim,
                plan_file=plan_file,
                plan_name=loaded.name,
                cpu=cpu,
                memory=memory,
            )
        )
        gather.append(_gather_pod(suffix, ns, claim))
    files = {
        "runtimeclasses.yaml": [runtime_class(name, handlers.get(name)) for name in classes],
        "namespace.yaml": objects_ns,
        "jobs.yaml": claims + jobs,
        "gather.yaml": gather,
    }
    problems = validate_objects([o for group in files.values() for o in group])
    if problems:
        raise ManifestError(f"a rendered manifest does not validate: {problems[0]}")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CCBenchError(f"-o {out}: cannot create the directory ({exc.strerror})") from None
    written = [write_manifests(objects, out / filename) for filename, objects in files.items()]
    guide = _write_gathering_guide(out, loaded.name, classes, ns, cpu=cpu, memory=memory)
    return written + [guide]


def _runtime_class_names(runtime_classes: list[str], handlers: dict[str, str]) -> list[str]:
    """The --runtime-class values checked, each once, in the order given."""
    unknown = [c for c in handlers if c not in runtime_classes]
    if unknown:
        raise ManifestError(f"--handler {unknown[0]}=...: {unknown[0]} is not one of the --runtime-class values")
    classes: list[str] = []
    for name in runtime_classes:
        if not DNS_LABEL.match(name):
            raise ManifestError(f"--runtime-class {name!r}: a RuntimeClass name is lower case letters, digits and '-'")
        if name not in classes:
            classes.append(name)
    return classes


def _plan_job(
    name: str,
    ns: str,
    image: str,
    plan_argument: str,
    claim: str,
    *,
    plan_file: bool,
    plan_name: str,
    cpu: str,
    memory: str,
) -> dict[str, Any]:
    """The Job running the plan under RuntimeClass ``name``, its bundle written to its claim."""
    suffix = k8s_name(name, max_length=40)
    mounts = [volume_mount("results", "/results"), volume_mount("work", "/work")]
    volumes: list[dict[str, Any]] = [
        {"name": "results", "persistentVolumeClaim": {"claimName": claim}},
        {"name": "work", "emptyDir": {}},
    ]
    if plan_file:
        mounts.append(volume_mount("plan", "/plan", read_only=True))
        volumes.append({"name": "plan", "configMap": {"name": "ccbench-plan"}})
    box = container(
        "ccbench",
        image,
        command=["ccbench"],
        args=["run", plan_argument, "--out", f"/results/{suffix}", "--workdir", "/work"],
        cpu=cpu,
        memory=memory,
        volume_mounts=mounts,
    )
    job_labels = labels("ccbench", **{"ccbench.dev/runtime-class": suffix, "ccbench.dev/plan": k8s_name(plan_name)})
    return job(f"ccbench-{suffix}", ns, pod_spec([box], runtime_class=name, volumes=volumes), object_labels=job_labels)


def _gather_pod(suffix: str, ns: str, claim: str) -> dict[str, Any]:
    """A pod that mounts a Job's results read-only, for ``kubectl cp`` to copy the bundle out."""
    reader = container(
        "reader",
        "busybox:1.36",
        command=["sleep", "3600"],
        cpu="100m",
        memory="64Mi",
        volume_mounts=[volume_mount("results", "/results", read_only=True)],
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(f"gather-{suffix}", ns, labels("ccbench-gather")),
        "spec": pod_spec(
            [reader],
            volumes=[{"name": "results", "persistentVolumeClaim": {"claimName": claim}}],
            restart_policy="Never",
        ),
    }


def _write_gathering_guide(out: Path, plan_name: str, classes: list[str], ns: str, *, cpu: str, memory: str) -> Path:
    """GATHERING.md: the commands that copy each bundle out and compare them, runc first if present."""
    suffixes = [k8s_name(name, max_length=40) for name in classes]
    baseline = "runc" if "runc" in suffixes else suffixes[0]
    path = out / "GATHERING.md"
    path.write_text(
        GATHERING.format(
            plan=plan_name,
            classes=", ".join(f"`{c}`" for c in classes),
            directory=out,
            namespace=ns,
            copy_lines="\n".join(f"kubectl -n {ns} cp gather-{s}:/results/{s} bundles/{s}" for s in suffixes),
            baseline=baseline,
            others=" ".join(f"bundles/{s}/*" for s in suffixes if s != baseline),
            label_args=" ".join(f"--label bundles/{s}/<bundle>={s}" for s in suffixes),
            cpu=cpu,
            memory=memory,
        )
    )
    return path
