"""ccbench fleet k8s: rendered Kubernetes manifests, checked offline with kubernetes-validate (strict).
No cluster runs here; the schemas are the API server's OpenAPI, shipped in the validator."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.basics import kube

yaml = pytest.importorskip("yaml", reason="install the fleet component (PyYAML): bash scripts/setup.sh --with fleet")

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="install the fleet component (kubernetes-validate)"
)

CLASSES = ["runc", "kata-qemu-snp", "kata-qemu-tdx"]


def fleet_k8s(*args):
    return subprocess.run(
        [sys.executable, "-m", "ccbench", "fleet", "k8s", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def _objects(directory: Path) -> list[dict]:
    found = []
    for path in sorted(directory.glob("*.yaml")):
        found += [o for o in yaml.safe_load_all(path.read_text()) if o]
    return found


def _validator_cli() -> str:
    return str(Path(sys.executable).parent / "kubernetes-validate")


def test_one_job_per_runtime_class_with_requests_equal_to_limits(tmp_path):
    out = tmp_path / "manifests"
    done = fleet_k8s(
        "quick",
        "--image",
        "ghcr.io/example/ccbench:0.1",
        *[a for c in CLASSES for a in ("--runtime-class", c)],
        "-o",
        out,
        "--cpu",
        "4",
        "--memory",
        "8Gi",
    )
    assert done.returncode == 0, done.stderr
    objects = _objects(out)
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert sorted(j["spec"]["template"]["spec"]["runtimeClassName"] for j in jobs) == sorted(CLASSES)
    for job in jobs:
        spec = job["spec"]["template"]["spec"]
        assert spec["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
        box = spec["containers"][0]
        assert box["image"] == "ghcr.io/example/ccbench:0.1"
        assert box["resources"]["requests"] == box["resources"]["limits"] == {"cpu": "4", "memory": "8Gi"}
        assert box["args"][:2] == ["run", "quick"]
        claim = next(v for v in spec["volumes"] if v["name"] == "results")["persistentVolumeClaim"]["claimName"]
        assert any(o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == claim for o in objects)
    runtime_classes = {o["metadata"]["name"]: o["handler"] for o in objects if o["kind"] == "RuntimeClass"}
    assert runtime_classes == {c: c for c in CLASSES}
    gathering = (out / "GATHERING.md").read_text()
    assert "nothing here was run" in gathering and "kubectl -n ccbench cp gather-kata-qemu-snp" in gathering
    # every object passes the strict schema check
    assert kube.validate_objects(objects) == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root for a network namespace")
def test_the_validator_works_offline_on_the_rendered_files(tmp_path):
    out = tmp_path / "manifests"
    assert (
        fleet_k8s(
            "quick",
            "--image",
            "example/ccbench:1",
            "--runtime-class",
            "runc",
            "--runtime-class",
            "kata-qemu-tdx",
            "-o",
            out,
        ).returncode
        == 0
    )
    files = sorted(str(p) for p in out.glob("*.yaml"))
    # in a fresh network namespace: no network at all, so nothing can be fetched
    done = subprocess.run(
        ["unshare", "-n", _validator_cli(), "--strict", "-k", kube.KUBERNETES_VERSION, *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ERROR" not in done.stdout and "WARN" not in done.stdout
    assert done.stdout.count("passed") == len(_objects(out))


def test_a_plan_file_travels_in_a_config_map(tmp_path):
    plan = tmp_path / "mine.toml"
    plan.write_text('name = "mine"\ndescription = "x"\n[[workloads]]\nkind = "prime"\nn = 1000\n')
    out = tmp_path / "manifests"
    done = fleet_k8s(plan, "--image", "example/ccbench:1", "--runtime-class", "kata-qemu-snp", "-o", out)
    assert done.returncode == 0, done.stderr
    objects = _objects(out)
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    assert config["data"]["plan.toml"] == plan.read_text()
    job = next(o for o in objects if o["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][1] == "/plan/plan.toml"
    assert kube.validate_objects(objects) == []


def test_the_strict_check_catches_a_wrong_manifest():
    job = kube.job("x", "ns", kube.pod_spec([kube.container("c", "example/i:1")]))
    assert kube.validate_objects([job]) == []
    job["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}  # unknown field
    problems = kube.validate_objects([job])
    assert problems and "Job/x" in problems[0]
    service = kube.service("s", "ns", selector={"a": "b"}, ports=[80])
    service["spec"]["ports"][0]["port"] = "eighty"  # wrong type
    assert kube.validate_objects([service])


def test_deployments_and_services_render_and_validate_for_other_users():
    box = kube.container(
        "api", "registry.example/api:1", args=["serve"], cpu="500m", memory="512Mi", ports=[8080], env={"MODE": "tls"}
    )
    objects = [
        kube.namespace("shop"),
        kube.runtime_class("kata-qemu-snp"),
        kube.deployment("api", "shop", kube.pod_spec([box], runtime_class="kata-qemu-snp"), replicas=2),
        kube.service("api", "shop", selector={kube.APP_LABEL: "api"}, ports=[8080]),
    ]
    assert kube.validate_objects(objects) == []
    deployment = objects[2]
    assert deployment["spec"]["selector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--runtime-class", "Kata_SNP"], "--runtime-class"),
        (["--runtime-class", "runc", "--cpu", "two"], "cpu"),
        (["--runtime-class", "runc", "--handler", "kata=x"], "--handler"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, args, expected):
    done = fleet_k8s("quick", "--image", "example/ccbench:1", *args, "-o", tmp_path / "m")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "m").exists()


def test_k8s_names():
    assert kube.k8s_name("Kata QEMU/SNP") == "kata-qemu-snp"
    with pytest.raises(kube.ManifestError):
        kube.k8s_name("///")
