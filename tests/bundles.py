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


def write(out: Path, host: str, tee: str, samples: list[Sample]) -> Path:
    """A closed bundle in ``out/host`` (plan "t") holding ``samples``; its path."""
    writer = BundleWriter.create(out / host, {"plan": {"name": "t"}, "environment": probe(host, tee)})
    writer.append_samples(samples)
    writer.close()
    return writer.path


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
