"""The sizes ccbench knows per cloud and what they cost: a dated table, not a live price feed.

Prices are on-demand Linux list prices per hour in one reference region per cloud, as the pages
named in SOURCES publish them, written into this table on PRICES_DATE without reading those pages
live (no price page is reachable from where ccbench is built and tested): `ccbench machines check`
prints the date and the pages, and a user compares them before spending. A size missing here is
refused, never guessed."""

from __future__ import annotations

from dataclasses import dataclass

PRICES_DATE = "2026-12-02"
#: the region each cloud's prices are for; a study in another region is estimated at these prices
REFERENCE_REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
SOURCES = {
    "aws": "https://aws.amazon.com/ec2/pricing/on-demand/ (and the AMD SEV-SNP note on the same page)",
    "gcp": "https://cloud.google.com/compute/vm-instance-pricing and "
    "https://cloud.google.com/confidential-computing/confidential-vm/pricing",
    "azure": "https://azure.microsoft.com/pricing/details/virtual-machines/linux/",
}
#: AWS bills an SEV-SNP instance an extra share of its on-demand price
AWS_SNP_SURCHARGE = 0.10
#: GCP bills a Confidential VM per vCPU-hour and per GiB-hour on top of the machine type
GCP_CC_PER_VCPU_HOUR = 0.005479
GCP_CC_PER_GIB_HOUR = 0.000734


@dataclass(frozen=True)
class Size:
    """One instance type: its shape, its CPU, the CC kinds it can launch as, its price per hour as a
    plain VM, and on Azure (where a confidential size is a size of its own) the size of its twin."""

    provider: str
    name: str
    vcpus: int
    memory_gib: float
    cpu: str
    kinds: tuple[str, ...]
    usd_per_hour: float
    #: Azure: the matched size of the other mode (DC2as_v5 <-> D2as_v5); elsewhere the size itself
    twin: str = ""

    def match_key(self) -> tuple:
        """What two matched arms share: shape and CPU (on Azure a confidential size and its twin
        have the same key)."""
        return (self.vcpus, self.memory_gib, self.cpu)


def _aws(name: str, vcpus: int, mem: float, price: float) -> Size:
    return Size("aws", name, vcpus, mem, "AMD EPYC 7R13 (Milan)", ("plain", "sev-snp"), price)


def _gcp(name: str, vcpus: int, mem: float, price: float, cpu: str, kinds: tuple[str, ...]) -> Size:
    return Size("gcp", name, vcpus, mem, cpu, kinds, price)


_MILAN = "AMD EPYC 7763v (Milan)"
_AZ_MILAN = "AMD EPYC 7763v (Milan)"
SIZES: dict[str, dict[str, Size]] = {
    "aws": {
        s.name: s
        for s in (
            _aws("m6a.large", 2, 8, 0.0864),
            _aws("m6a.xlarge", 4, 16, 0.1728),
            _aws("m6a.2xlarge", 8, 32, 0.3456),
            _aws("c6a.large", 2, 4, 0.0765),
            _aws("c6a.xlarge", 4, 8, 0.153),
            _aws("r6a.large", 2, 16, 0.1134),
            _aws("r6a.xlarge", 4, 32, 0.2268),
        )
    },
    "gcp": {
        s.name: s
        for s in (
            _gcp("n2d-standard-2", 2, 8, 0.084492, "AMD Milan", ("plain", "sev-snp")),
            _gcp("n2d-standard-4", 4, 16, 0.168984, "AMD Milan", ("plain", "sev-snp")),
            _gcp("n2d-standard-8", 8, 32, 0.337968, "AMD Milan", ("plain", "sev-snp")),
            _gcp("c3-standard-4", 4, 16, 0.20888, "Intel Sapphire Rapids", ("plain", "tdx")),
            _gcp("c3-standard-8", 8, 32, 0.41776, "Intel Sapphire Rapids", ("plain", "tdx")),
        )
    },
    "azure": {
        s.name: s
        for s in (
            Size("azure", "Standard_DC2as_v5", 2, 8, _AZ_MILAN, ("sev-snp",), 0.096, "Standard_D2as_v5"),
            Size("azure", "Standard_D2as_v5", 2, 8, _AZ_MILAN, ("plain",), 0.086, "Standard_DC2as_v5"),
            Size("azure", "Standard_DC4as_v5", 4, 16, _AZ_MILAN, ("sev-snp",), 0.192, "Standard_D4as_v5"),
            Size("azure", "Standard_D4as_v5", 4, 16, _AZ_MILAN, ("plain",), 0.172, "Standard_DC4as_v5"),
            Size("azure", "Standard_EC2as_v5", 2, 16, _AZ_MILAN, ("sev-snp",), 0.126, "Standard_E2as_v5"),
            Size("azure", "Standard_E2as_v5", 2, 16, _AZ_MILAN, ("plain",), 0.113, "Standard_EC2as_v5"),
            # DCesv5 (Sapphire Rapids TDX) has no general-purpose Azure size on the same CPU to be its
            # plain twin: listed so that a TDX arm is refused with that reason, not as unknown
            Size("azure", "Standard_DC2es_v5", 2, 8, "Intel Xeon 8573C (Sapphire Rapids)", ("tdx",), 0.107, ""),
            Size("azure", "Standard_DC4es_v5", 4, 16, "Intel Xeon 8573C (Sapphire Rapids)", ("tdx",), 0.214, ""),
        )
    },
}


def size(provider: str, name: str) -> Size | None:
    return SIZES.get(provider, {}).get(name)


def hourly(s: Size, kind: str) -> float:
    """What one instance of this size costs per hour as an arm of this kind, the CC surcharge in."""
    if kind == "plain":
        return s.usd_per_hour
    if s.provider == "aws":
        return s.usd_per_hour * (1 + AWS_SNP_SURCHARGE)
    if s.provider == "gcp":
        return s.usd_per_hour + s.vcpus * GCP_CC_PER_VCPU_HOUR + s.memory_gib * GCP_CC_PER_GIB_HOUR
    return s.usd_per_hour  # Azure: the DC/EC size's own price is the confidential price


def estimate(rates: list[float], hours: float) -> float:
    """price per hour x arms x expected hours: the sum of the arms' hourly prices times the hours."""
    return sum(rates) * hours
