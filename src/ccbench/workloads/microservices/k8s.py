"""The same chain as Kubernetes manifests, for confidential containers (rendered, validated offline,
not run here)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ccbench.workloads.base import WorkloadFailed
from ccbench.workloads.microservices.nginx import nginx_config
from ccbench.workloads.microservices.oha import mix_url_regex, oha_argv
from ccbench.workloads.microservices.params import TIERS, MicroservicesParams
from ccbench.workloads.microservices.tiers import app_args, seed_args

K8S_PORTS = {"nginx": 8080, "app": 8080, "memcached": 11211, "redis": 6379, "postgres": 5432}
#: the database as the other tiers reach it through its Service
PG_URL = f"postgres://ccbench@postgres:{K8S_PORTS['postgres']}/postgres?sslmode=disable"
K8S_IMAGES = {"nginx": "nginx:1.27", "memcached": "memcached:1.6", "redis": "redis:7", "postgres": "postgres:15"}


def k8s_manifests(
    params: MicroservicesParams,
    *,
    app_image: str,
    loadgen_image: str,
    runtime_class: str | None,
    namespace: str = "ccbench-socialnet",
    transport: str = "plain",
    rate: float = 100.0,
    tls_secret: str = "socialnet-tls",
    images: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Deployments and Services for every tier (with ``runtimeClassName`` = runtime_class, e.g.
    ``kata-qemu-snp``), nginx's configuration as a ConfigMap, and a load Job (default runtime: the
    client stands for the edge device) that seeds the dataset, then runs oha open-loop at ``rate``
    with the plan's mix. ``app_image`` holds services/socialnet (see its Dockerfile); ``loadgen_image``
    an ``oha`` binary. With transport = "tls", nginx serves TLS 1.3 with the certificate and key of
    the Secret ``tls_secret`` (keys tls.crt and tls.key), which the user creates."""
    from ccbench.basics import kube as k8s

    if transport not in ("plain", "tls"):
        raise WorkloadFailed(f"transport {transport!r}: the manifests support plain and tls")
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadFailed(f"rate must be a positive request rate, not {rate:g}")
    images = {**K8S_IMAGES, **(images or {})}
    p = params
    objects: list[dict[str, Any]] = [k8s.namespace(namespace)]
    if runtime_class:
        objects.append(k8s.runtime_class(runtime_class))
    tls = transport == "tls"
    cert = Path("/etc/ccbench/tls/tls.crt") if tls else None
    key = Path("/etc/ccbench/tls/tls.key") if tls else None
    conf = nginx_config(
        Path("/tmp/ccbench"), "0.0.0.0", K8S_PORTS["nginx"], f"app:{K8S_PORTS['app']}", p.nginx_workers, cert, key
    )
    objects.append(k8s.config_map("nginx-conf", namespace, {"nginx.conf": conf}))
    containers = _tier_containers(p, images, app_image, tls)
    for tier in TIERS:
        objects += _tier_objects(tier, containers[tier], namespace, runtime_class, tls, tls_secret)
    objects.append(_load_job(p, namespace, app_image, loadgen_image, rate, tls))
    return objects


def _tier_containers(p: MicroservicesParams, images: dict[str, str], app_image: str, tls: bool) -> dict[str, Any]:
    """Each tier's container: the stores from their public images, the Go tier from ``app_image``,
    nginx with the configuration (and with TLS, the certificate) mounted."""
    from ccbench.basics import kube as k8s

    return {
        "postgres": k8s.container(
            "postgres",
            images["postgres"],
            ports=[K8S_PORTS["postgres"]],
            cpu="1",
            memory="1Gi",
            env={"POSTGRES_USER": "ccbench", "POSTGRES_DB": "postgres", "POSTGRES_HOST_AUTH_METHOD": "trust"},
        ),
        "redis": k8s.container(
            "redis",
            images["redis"],
            args=["--save", "", "--appendonly", "no", "--protected-mode", "no"],
            ports=[K8S_PORTS["redis"]],
            cpu="500m",
            memory="512Mi",
        ),
        "memcached": k8s.container(
            "memcached",
            images["memcached"],
            args=["-m", "256", "-t", "2", "-c", "4096"],
            ports=[K8S_PORTS["memcached"]],
            cpu="500m",
            memory="512Mi",
        ),
        "app": k8s.container(
            "app",
            app_image,
            args=app_args(
                p,
                f"0.0.0.0:{K8S_PORTS['app']}",
                PG_URL,
                f"redis:{K8S_PORTS['redis']}",
                f"memcached:{K8S_PORTS['memcached']}",
            ),
            ports=[K8S_PORTS["app"]],
            cpu="1",
            memory="512Mi",
        ),
        "nginx": k8s.container(
            "nginx",
            images["nginx"],
            command=["sh", "-c"],
            args=[
                "mkdir -p /tmp/ccbench/logs /tmp/ccbench/nginx-temp && "
                "exec nginx -c /etc/ccbench/nginx/nginx.conf -p /tmp/ccbench -g 'daemon off;'"
            ],
            ports=[K8S_PORTS["nginx"]],
            cpu="1",
            memory="256Mi",
            volume_mounts=[
                k8s.volume_mount("nginx-conf", "/etc/ccbench/nginx", read_only=True),
                k8s.volume_mount("scratch", "/tmp/ccbench"),
            ]
            + ([k8s.volume_mount("tls", "/etc/ccbench/tls", read_only=True)] if tls else []),
        ),
    }


def _tier_objects(
    tier: str, container: dict[str, Any], namespace: str, runtime_class: str | None, tls: bool, tls_secret: str
) -> list[dict[str, Any]]:
    """A tier's Deployment (in the confidential runtime class) and its Service; nginx's is "front"."""
    from ccbench.basics import kube as k8s

    volumes = None
    if tier == "nginx":
        volumes = [{"name": "nginx-conf", "configMap": {"name": "nginx-conf"}}, {"name": "scratch", "emptyDir": {}}]
        if tls:
            volumes.append({"name": "tls", "secret": {"secretName": tls_secret}})
    spec = k8s.pod_spec([container], runtime_class=runtime_class, volumes=volumes)
    return [
        k8s.deployment(tier if tier != "nginx" else "front", namespace, spec),
        k8s.service(
            tier if tier != "nginx" else "front",
            namespace,
            selector={k8s.APP_LABEL: tier if tier != "nginx" else "front"},
            ports=[K8S_PORTS[tier]],
        ),
    ]


def _load_job(
    p: MicroservicesParams, namespace: str, app_image: str, loadgen_image: str, rate: float, tls: bool
) -> dict[str, Any]:
    """The load Job in the default runtime (the client stands for the edge device): the dataset seeded
    by an init container, then oha open-loop at ``rate`` with the plan's mix."""
    from ccbench.basics import kube as k8s

    base = f"{'https' if tls else 'http'}://front:{K8S_PORTS['nginx']}"
    load = k8s.container(
        "oha",
        loadgen_image,
        command=["oha"],
        args=[
            *oha_argv(
                mix_url_regex(base, p.mix, p.users),
                rate=rate,
                duration=p.duration,
                connections=p.connections,
                timeout=p.request_timeout,
                cacert=None,
            )[1:],
            *(["--insecure"] if tls else []),
        ],
        cpu="1",
        memory="256Mi",
    )
    seed = k8s.container(
        "seed",
        app_image,
        args=seed_args(p, PG_URL, f"redis:{K8S_PORTS['redis']}"),
        cpu="500m",
        memory="256Mi",
    )
    load_spec = k8s.pod_spec([load])
    load_spec["initContainers"] = [seed]
    return k8s.job("load", namespace, load_spec, active_deadline_s=int(p.duration + 600))
