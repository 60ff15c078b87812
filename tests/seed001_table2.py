"""Bundles built from seed 001's published Table II (TDX part): wall-clock times [HH:MM] to train
ResNet-18 and MobileNetV3-Small for 100 federated rounds on MNIST, CIFAR10 and CIFAR100, on a plain
machine and a TDX machine, each with and without TLS. The paper's own fit (its Fig. 2): ResNet-18
C_TDX 0.126, C_TLS 0.079; MobileNetV3-Small 0.245 and 0.065.

Each published time becomes three repetitions (the time x 0.999, 1, 1.001: the table has one run
per cell; ccbench needs two or more per configuration for an interval).
"""

from __future__ import annotations

from pathlib import Path

from bundles import seal

from ccbench.bundle import BundleWriter
from ccbench.model import Sample

DATASETS = ["MNIST", "CIFAR10", "CIFAR100"]
#: (machine TEE, transport) -> model -> HH:MM per dataset, as printed in Table II
TABLE_II = {
    ("none", "plain"): {"resnet18": ["01:00", "01:10", "01:00"], "mobilenetv3-small": ["00:53", "00:57", "00:58"]},
    ("none", "tls"): {"resnet18": ["01:04", "01:12", "01:08"], "mobilenetv3-small": ["00:54", "00:59", "01:02"]},
    ("tdx", "plain"): {"resnet18": ["01:05", "01:18", "01:11"], "mobilenetv3-small": ["01:16", "01:07", "01:07"]},
    ("tdx", "tls"): {"resnet18": ["01:08", "01:26", "01:15"], "mobilenetv3-small": ["01:18", "01:11", "01:12"]},
}
PAPER = {"resnet18": {"tee": 0.126, "tls": 0.079}, "mobilenetv3-small": {"tee": 0.245, "tls": 0.065}}
JITTER = (0.999, 1.0, 1.001)


def seconds(hh_mm: str) -> float:
    hours, minutes = hh_mm.split(":")
    return (int(hours) * 60 + int(minutes)) * 60.0


def write_table2_bundles(root: Path) -> list[Path]:
    """Two bundles (machines "baseline-vm" without a TEE and "tdx-vm" with TDX), transport plain and tls."""
    paths = []
    for host, tee in (("baseline-vm", "none"), ("tdx-vm", "tdx")):
        probe = {
            "hostname": host,
            "tee": {"technology": tee, "evidence": []},
            "cpu": {"model": "Xeon"},
            "memory": {},
            "kernel": {"release": "6"},
            "storage": {"protection": "plain"},
        }
        plan = {
            "name": "seed001-table2",
            "workloads": [
                {
                    "kind": "federated",
                    "name": model,
                    "repetitions": 3,
                    "warmup": 0,
                    "cooldown": 0,
                    "variants": {"transport": ["plain", "tls"]},
                }
                for model in ("resnet18", "mobilenetv3-small")
            ],
        }
        writer = BundleWriter.create(root / host, {"plan": plan, "environment": probe})
        samples = []
        for rep, factor in enumerate(JITTER):
            for model in ("resnet18", "mobilenetv3-small"):
                for index, dataset in enumerate(DATASETS):
                    for transport in ("plain", "tls"):
                        samples.append(
                            Sample(
                                workload=model,
                                kind="federated",
                                params={"dataset": dataset},
                                variant={"transport": transport},
                                metric="wall_time",
                                unit="s",
                                value=seconds(TABLE_II[(tee, transport)][model][index]) * factor,
                                better="lower",
                                repetition=rep,
                                warmup=False,
                                timestamp="2024-01-01T00:00:00Z",
                                metadata={"case": {"dataset": dataset}},
                            )
                        )
        writer.append_samples(samples)
        writer.close()
        paths.append(seal(writer.path))
    return paths
