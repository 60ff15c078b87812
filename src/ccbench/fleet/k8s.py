"""Kubernetes manifests for running ccbench in (confidential) containers: rendered here, not run.

``ccbench fleet k8s`` renders one Job per RuntimeClass (``runc``, ``kata-qemu-snp``,
``kata-qemu-tdx``, ...) that runs a plan in an image and keeps its bundle on a volume claim,
plus the RuntimeClass objects and GATHERING.md. No cluster is reachable from where ccbench is
developed: the manifests are checked against the Kubernetes OpenAPI schemas offline
(``kubernetes-validate``, strict), never applied by ccbench.

The building blocks are small functions returning plain dicts, so other parts of ccbench (the
microservice workload's Deployments and Services) render their objects the same way::

    from ccbench.fleet import k8s
    box = k8s.container("api", "registry/api:1", args=["serve"], cpu="1", memory="1Gi",
                        ports=[8080], env={"MODE": "tls"})
    spec = k8s.pod_spec([box], runtime_class="kata-qemu-snp")
    objects = [k8s.namespace("shop"), k8s.runtime_class("kata-qemu-snp"),
               k8s.deployment("api", "shop", spec, replicas=2),
               k8s.service("api", "shop", selector={"app.kubernetes.io/name": "api"}, ports=[8080])]
    k8s.write_manifests(objects, out / "shop.yaml")
    assert k8s.validate_objects(objects) == []       # strict, offline

Every container gets resource requests equal to its limits: Kata sizes the confidential guest
from them (and the pod lands in the Guaranteed QoS class).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ccbench.errors import CCBenchError

#: Kubernetes version the manifests are validated against (kubernetes-validate's schemas)
KUBERNETES_VERSION = "1.31.0"
APP_LABEL = "app.kubernetes.io/name"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/:@+]*$")


class ManifestError(CCBenchError):
    """A value cannot go into a Kubernetes object (name, quantity, image)."""


def k8s_name(text: str, *, max_length: int = 63) -> str:
    """``text`` as a DNS-1123 label (lower case, digits, '-'): what object names must be."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:max_length].strip("-")
    if not name or not _DNS_LABEL.match(name):
        raise ManifestError(f"{text!r} cannot be made into a Kubernetes name (letters, digits and '-')")
    return name


def _quantity(value: str, what: str) -> str:
    value = str(value)
    if not _QUANTITY.match(value):
        raise ManifestError(f"{what} {value!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
    return value


def labels(name: str, **extra: str) -> dict[str, str]:
    return {APP_LABEL: name, "app.kubernetes.io/part-of": "ccbench", **extra}


def metadata(
    name: str,
    namespace: str | None = None,
    object_labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": k8s_name(name)}
    if namespace:
        meta["namespace"] = k8s_name(namespace)
    if object_labels:
        meta["labels"] = dict(object_labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(name, object_labels=labels(name))}


def runtime_class(name: str, handler: str | None = None) -> dict[str, Any]:
    """A RuntimeClass (cluster-scoped). The handler is the CRI runtime's name for it (containerd:
    the runtime name in its config; Kata's installer uses the class name, e.g. kata-qemu-snp)."""
    handler = handler or name
    if not _DNS_LABEL.match(handler):
        raise ManifestError(f"runtime handler {handler!r} must be a DNS label (lower case, digits, '-')")
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": metadata(name, object_labels=labels("ccbench")),
        "handler": handler,
    }


def resources(cpu: str, memory: str) -> dict[str, Any]:
    """Requests equal to limits (Kata sizes the guest from them; Guaranteed QoS)."""
    amounts = {"cpu": _quantity(cpu, "cpu"), "memory": _quantity(memory, "memory")}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def container(
    name: str,
    image: str,
    *,
    command: list[str] | None = None,
    args: list[str] | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    env: dict[str, str] | None = None,
    ports: Iterable[int] | None = None,
    volume_mounts: list[dict[str, Any]] | None = None,
    working_dir: str | None = None,
    privileged: bool = False,
) -> dict[str, Any]:
    if not _IMAGE.match(image or ""):
        raise ManifestError(f"image {image!r} is not an image reference (registry/name:tag)")
    box: dict[str, Any] = {"name": k8s_name(name), "image": image, "resources": resources(cpu, memory)}
    if command:
        box["command"] = list(command)
    if args:
        box["args"] = list(args)
    if env:
        box["env"] = [{"name": key, "value": str(value)} for key, value in env.items()]
    if ports:
        box["ports"] = [{"containerPort": int(port), "protocol": "TCP"} for port in ports]
    if volume_mounts:
        box["volumeMounts"] = list(volume_mounts)
    if working_dir:
        box["workingDir"] = working_dir
    if privileged:
        box["securityContext"] = {"privileged": True}
    return box


def volume_mount(name: str, path: str, read_only: bool = False) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": k8s_name(name), "mountPath": path}
    if read_only:
        mount["readOnly"] = True
    return mount


def pod_spec(
    containers: list[dict[str, Any]],
    *,
    runtime_class: str | None = None,
    volumes: list[dict[str, Any]] | None = None,
    restart_policy: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if runtime_class:
        spec["runtimeClassName"] = k8s_name(runtime_class)
    if volumes:
        spec["volumes"] = volumes
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return spec


def job(
    name: str,
    namespace_name: str,
    spec: dict[str, Any],
    *,
    object_labels: dict[str, str] | None = None,
    backoff_limit: int = 0,
    active_deadline_s: int | None = None,
) -> dict[str, Any]:
    """A Job that runs its pod once (a failed benchmark is not silently repeated)."""
    object_labels = object_labels or labels(name)
    pod = dict(spec)
    pod.setdefault("restartPolicy", "Never")
    body: dict[str, Any] = {
        "backoffLimit": backoff_limit,
        "template": {"metadata": {"labels": dict(object_labels)}, "spec": pod},
    }
    if active_deadline_s:
        body["activeDeadlineSeconds"] = int(active_deadline_s)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(name, namespace_name, object_labels),
        "spec": body,
    }


def deployment(
    name: str,
    namespace_name: str,
    spec: dict[str, Any],
    *,
    replicas: int = 1,
    object_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    object_labels = object_labels or labels(name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, namespace_name, object_labels),
        "spec": {
            "replicas": int(replicas),
            "selector": {"matchLabels": dict(object_labels)},
            "template": {"metadata": {"labels": dict(object_labels)}, "spec": spec},
        },
    }


def service(
    name: str, namespace_name: str, *, selector: dict[str, str], ports: Iterable[int], cluster_ip: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": dict(selector),
        "ports": [{"name": f"tcp-{int(p)}", "port": int(p), "targetPort": int(p), "protocol": "TCP"} for p in ports],
    }
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, namespace_name, labels(name)),
        "spec": spec,
    }


def config_map(name: str, namespace_name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, namespace_name, labels(name)),
        "data": dict(data),
    }


def volume_claim(name: str, namespace_name: str, size: str, storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": _quantity(size, "storage")}},
    }
    if storage_class:
        spec["storageClassName"] = k8s_name(storage_class)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(name, namespace_name, labels(name)),
        "spec": spec,
    }


def write_manifests(objects: list[dict[str, Any]], path: Path) -> Path:
    """The objects as one multi-document YAML file."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False))
    return path


def validate_objects(objects: list[dict[str, Any]], version: str = KUBERNETES_VERSION) -> list[str]:
    """Strict offline schema check (kubernetes-validate): one message per invalid object; an
    object whose schema is unknown counts as invalid."""
    try:
        import kubernetes_validate
        from kubernetes_validate.utils import SchemaNotFoundError, ValidationError
    except ImportError:
        raise CCBenchError("kubernetes-validate is not installed (pip install 'ccbench[fleet]')") from None
    problems = []
    for item in objects:
        what = f"{item.get('kind')}/{(item.get('metadata') or {}).get('name')}"
        try:
            kubernetes_validate.validate(item, version, strict=True)
        except ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            problems.append(f"{what}: {path}: {exc.message}")
        except SchemaNotFoundError as exc:
            problems.append(f"{what}: no schema ({exc.message})")
    return problems


def validate_files(paths: Iterable[Path], version: str = KUBERNETES_VERSION) -> list[str]:
    import yaml

    problems = []
    for path in paths:
        objects = [o for o in yaml.safe_load_all(Path(path).read_text()) if o]
        problems += [f"{path}: {p}" for p in validate_objects(objects, version)]
    return problems


# ------------------------------------------------------------------------------ ccbench fleet k8s

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
    from ccbench.plan import load_plan

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
        if not _DNS_LABEL.match(name):
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
