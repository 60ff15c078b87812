"""Synthetic bundles for the analysis, helper and report tests: one writer (``write``) and the
shapes those tests build on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ccbench.bundle import BundleWriter
from ccbench.model import Sample

#: the fields every synthetic sample shares unless a test says otherwise
SAMPLE_DEFAULTS = {
    "kind": "command",
    "params": {},
    "unit": "s",
    "better": "lower",
    "warmup": False,
    "timestamp": "2026-01-01T00:00:00Z",
}


def probe(host: str, tee: str) -> dict:
    """The environment of a machine named ``host`` with the TEE technology ``tee`` ("none" for none)."""
    return {
        "hostname": host,
        "tee": {"technology": tee, "evidence": []},
        "cpu": {"model": "x"},
        "memory": {},
        "kernel": {"release": "6"},
        "storage": {"protection": "plain"},
    }


def sample(**fields) -> Sample:
    """A Sample of SAMPLE_DEFAULTS and ``fields`` (extra keys such as ``contended`` kept, as bundle
    format 2 has them)."""
    return Sample(**{**SAMPLE_DEFAULTS, **fields})


def seal(bundle: Path) -> Path:
    """Write the bundle's digest list (attestation.json, no evidence) as a run does when it ends, so
    that the analysis, which reads only bundles that verify (ccbench.attestation.onread), reads it."""
    from ccbench.attestation import finish_bundle

    finish_bundle(bundle, provider=None)
    return bundle


def write(out: Path, host: str, tee: str, samples: list[Sample]) -> Path:
    """A closed bundle in ``out/host`` (plan "t") holding ``samples``, with its digest list; its path."""
    writer = BundleWriter.create(out / host, {"plan": {"name": "t"}, "environment": probe(host, tee)})
    writer.append_samples(samples)
    writer.close()
    return seal(writer.path)


def write_samples(out, host, tee, samples):
    """A bundle with the given sample dicts (extra keys such as ``contended`` kept, as bundle format 2 has them)."""
    return write(out, host, tee, [sample(**s) for s in samples])


def write_bundle(out, host, tee, values_by_variant, metric="time", better="lower", workload="w", warmups=()):
    """One workload and metric: per variant (a tuple of (axis, value) pairs) the ``warmups`` as
    warmup samples, then its values."""
    samples = []
    for variant, values in values_by_variant.items():
        common = {"workload": workload, "variant": dict(variant), "metric": metric, "better": better}
        samples += [sample(**common, value=v, repetition=i, warmup=True) for i, v in enumerate(warmups)]
        samples += [sample(**common, value=v, repetition=i) for i, v in enumerate(values)]
    return write(out, host, tee, samples)


#: (host, TEE technology, slowdown) of the three machines of ``write_bundles``
MACHINES = [("plain", "none", 1.0), ("snp", "sev-snp", 1.05), ("tdx", "tdx", 1.08)]


def write_bundles(root, per_case=6):
    """Three machines x two storage variants, fio cases with percentiles and a CPU workload."""
    rng = np.random.default_rng(7)
    paths = []
    for host, tee, factor in MACHINES:
        samples = []
        for variant, slow in (
            ({"storage": "disk"}, 1.0),
            ({"storage": "encrypted", "storage_mechanism": "fscrypt"}, 1.3),
        ):
            for bs in ("4k", "1m"):
                case = {"bs": bs, "rw": "randread"}
                for metric, better in (("throughput", "higher"), ("clat_p50", "lower"), ("clat_p99", "lower")):
                    for rep, noise in enumerate(rng.normal(0, 0.02, per_case)):
                        value = 100 * factor * slow * np.exp(noise)
                        samples.append(
                            sample(
                                workload="fio",
                                kind="fio",
                                params=case,
                                variant=variant,
                                metric=metric,
                                unit="us",
                                better=better,
                                value=1e4 / value if better == "higher" else value,
                                repetition=rep,
                                metadata={"case": case},
                            )
                        )
            for rep, noise in enumerate(rng.normal(0, 0.01, per_case)):
                samples.append(
                    sample(
                        workload="prime",
                        kind="prime",
                        variant=variant,
                        metric="time",
                        value=2.0 * factor * np.exp(noise),
                        repetition=rep,
                    )
                )
        paths.append(write(root, host, tee, samples))
    return paths


# ---- machines with provenance (the lint's tests) ------------------------------------------------------

#: CPUs of seed 000's Azure machines: D2_v5 (Ice Lake, Intel-Non-TDX) and DC2eds_v5 (a 4th-generation
#: Xeon, Sapphire Rapids, Intel-TDX); family and model numbers as CPUID reports them
ICE_LAKE = {
    "model": "Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz",
    "vendor": "GenuineIntel",
    "family": "6",
    "model_number": "106",
}
SAPPHIRE_RAPIDS = {
    "model": "Intel(R) Xeon(R) Platinum 8473C",
    "vendor": "GenuineIntel",
    "family": "6",
    "model_number": "143",
}


def provenance_probe(
    host: str,
    tee: str,
    cpu: dict | None = None,
    vcpus: int = 2,
    memory_bytes: int = 8 * 2**30,
    smt: bool | None = False,
    kernel: str = "6.8.0-1021-azure",
    thp: str = "madvise",
    hugepages_total: int = 0,
    swiotlb_bytes: int | None = 512 * 2**20,
    tee_evidence: dict | None = None,
) -> dict:
    """A probe document with the provenance block (the keys ccbench's probe records), for one machine."""
    cpu = dict(cpu or ICE_LAKE, threads=vcpus, cores=vcpus)
    return {
        "hostname": host,
        "tee": {"technology": tee, "evidence": []},
        "cpu": cpu,
        "memory": {"total_bytes": memory_bytes},
        "kernel": {"release": kernel},
        "storage": {"protection": "plain"},
        "provenance": {
            "kernel_cmdline": "console=ttyS0",
            "swiotlb": {"bytes": swiotlb_bytes, "source": "kernel log", "cmdline": None},
            "page_size": 4096,
            "thp": {"enabled": thp, "defrag": "madvise"},
            "hugepages_total": hugepages_total,
            "vcpus": vcpus,
            "smt": smt,
            "memory_bytes": memory_bytes,
            "cpu_model": cpu["model"],
            "microcode": "0xd0003b9",
            "hypervisor": "microsoft",
            "tdx_idle": None,
            "tee_evidence": tee_evidence,
        },
    }


def snp_evidence(debug: bool) -> dict:
    raw = 0x30000 | (1 << 19 if debug else 0)  # bit 16 SMT allowed, 17 reserved (one), 19 DEBUG
    return {
        "technology": "sev-snp",
        "policy": {"raw": hex(raw), "debug": debug, "smt": True, "migrate_ma": False, "single_socket": False},
        "vmpl": 0,
        "reported_tcb": {"bootloader": 3, "tee": 0, "snp": 8, "microcode": 115},
        "current_tcb": {"bootloader": 3, "tee": 0, "snp": 8, "microcode": 115},
        "platform_info": {"smt_enabled": True, "tsme_enabled": False},
    }


def tdx_evidence(debug: bool) -> dict:
    return {
        "technology": "tdx",
        "tee_tcb_svn": "03000600000000000000000000000000",
        "mrseam": "2fd279c16164a93dd5bf373d834328d46008c2b693af9ebb865b08b2ced320c9a89b4869a9fab60fbe9d0c5a5363c656",
        "td_attributes": {
            "raw": hex((1 << 28) | int(debug)),
            "debug": debug,
            "sept_ve_disable": True,
        },
    }


def write_environment(out: Path, environment: dict, samples: list[Sample], plan: dict | None = None) -> Path:
    """A closed bundle in ``out/<hostname>`` with this probe document and plan (default: plan "t")."""
    manifest = {"plan": plan or {"name": "t"}, "environment": environment}
    writer = BundleWriter.create(out / environment["hostname"], manifest)
    writer.append_samples(samples)
    writer.close()
    return seal(writer.path)


def write_settled(
    out: Path, host: str, values_by_variant: dict, target: float = 0.05, stopped_by=None, limit=None, **fields
):
    """A closed bundle of a run that settled its cases (``run --settle``): per variant key
    ("storage=disk", the baseline first) its values, one per round, with their execution keys; the
    manifest's ``outcomes.<workload>.settled`` names the target, the baseline and what stopped
    each variant (``stopped_by``: {key: word}, "settled" where not given); with ``limit`` the record
    says its intervals were the repeated ones built for that round limit (without: a record from
    before, read as anytime-valid). ``fields``: the samples' workload, metric, better, ..."""
    common = {"workload": "w", "metric": "time", **fields}
    samples = []
    for key, values in values_by_variant.items():
        variant = dict(part.split("=") for part in key.split(","))
        samples += [
            sample(**common, variant=variant, value=v, repetition=r, execution=f"{common['workload']}|{key}|rep|{r}")
            for r, v in enumerate(values)
        ]
    keys = list(values_by_variant)
    settled = {
        "target": target,
        "baseline": keys[0],
        "variants": {key: {"stopped_by": (stopped_by or {}).get(key, "settled"), "cases": {}} for key in keys[1:]},
        **({"interval": "repeated", "limit": limit} if limit else {}),
    }
    manifest = {
        "plan": {"name": "t"},
        "environment": probe(host, "none"),
        "outcomes": {common["workload"]: {"status": "ok", "settled": settled}},
    }
    writer = BundleWriter.create(out / host, manifest)
    writer.append_samples(samples)
    writer.close()
    return seal(writer.path)
