"""Kubernetes objects as plain dicts, written as YAML and validated offline: the building blocks
the fleet's Jobs (``ccbench.fleet.k8s``) and the microservice workload's Deployments and Services
are rendered from. It sits below both, so a workload never imports the fleet.

No cluster is reachable from where ccbench is developed: the manifests are checked against the
Kubernetes OpenAPI schemas offline (``kubernetes-validate``, strict), never applied by ccbench::

    from ccbench import kube as k8s
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

from ccbench.basics.errors import CCBenchError

#: Kubernetes version the manifests are validated against (kubernetes-validate's schemas)
KUBERNETES_VERSION = "1.31.0"
APP_LABEL = "app.kubernetes.io/name"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/:@+]*$")


class ManifestError(CCBenchError):
    """A value cannot go into a Kubernetes object (name, quantity, image)."""


def k8s_name(text: str, *, max_length: int = 63) -> str:
    """``text`` as a DNS-1123 label (lower case, digits, '-'): what object names must be."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:max_length].strip("-")
    if not name or not DNS_LABEL.match(name):
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
    if not DNS_LABEL.match(handler):
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
