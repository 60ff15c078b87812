"""A layer settled across workloads leaves out the cases the comparison leaves out as implausible
(ccbench.analysis.settling.plausible): fio's direct I/O on fscrypt is served through the page cache,
so its rows measure the page cache, and the verdict keeps them out; the run's settled line, its
record and its costliest case must keep them out too."""

import json

import numpy as np

from ccbench.analysis.settling.layer_settle import LEFT_OUT, LayerSettlement, across, settle_layer
from ccbench.analysis.settling.plausible import left_out
from ccbench.analysis.statistics.sequential import loop_twins, paired_against
from ccbench.model import Sample

DISK, LOOP, FSCRYPT, TMPFS = "storage=disk", "storage=ext4-loop", "storage=encrypted", "storage=tmpfs"
KEYS = [DISK, FSCRYPT, TMPFS, LOOP]
VARIANTS = {
    DISK: {"storage": "disk", "storage_mechanism": "none"},
    LOOP: {"storage": "ext4-loop", "storage_mechanism": "none"},
    FSCRYPT: {"storage": "encrypted", "storage_mechanism": "fscrypt"},
    TMPFS: {"storage": "tmpfs", "storage_mechanism": "none"},
}
#: IOPS per variant and job: fscrypt's 4k random reads 30x below the loop file's (as buffered
#: direct I/O on a software cipher goes), its 1m reads 1.1x
IOPS = {
    ("4k", "randread"): {DISK: 9000, LOOP: 8000, FSCRYPT: 8000 / 30, TMPFS: 60000},
    ("1m", "read"): {DISK: 600, LOOP: 550, FSCRYPT: 500, TMPFS: 3000},
}


def fio_samples(direct: bool, rounds: int = 5, seed: int = 3) -> list[Sample]:
    """fio's three figures per job and variant, consistent with Little's law at depth 16 and with
    IOPS x block size, a little noise per round."""
    rng = np.random.default_rng(seed)
    out = []
    for (bs, rw), per_key in IOPS.items():
        params = {"bs": bs, "rw": rw, "direction": "read", "iodepth": 16, "ioengine": "libaio", "direct": direct}
        size = 4096 if bs == "4k" else 1 << 20
        for rep in range(rounds):
            for key in KEYS:
                iops = per_key[key] * float(np.exp(rng.normal(0, 0.02)))
                figures = {"iops": iops, "clat_mean": 16 / iops * 1e6, "throughput": iops * size / 1e6}
                for metric, value in figures.items():
                    out.append(
                        Sample(
                            workload="fio",
                            kind="fio",
                            params=params,
                            variant=VARIANTS[key],
                            metric=metric,
                            unit="x",
                            value=value,
                            better="lower" if metric == "clat_mean" else "higher",
                            repetition=rep,
                            warmup=False,
                            timestamp="2026-12-03T00:00:00Z",
                            metadata={"case": {"bs": bs, "rw": rw, "direction": "read"}},
                            execution=f"fio|{key}|rep|{rep}",
                        )
                    )
    return out


def fscrypt_layer(direct: bool, plausible: bool = True) -> LayerSettlement:
    """fscrypt against its loop twin over fio and a compression workload (a 1.1x cost each round)."""
    samples = fio_samples(direct)
    against = loop_twins(samples, KEYS)
    assert against == {FSCRYPT: LOOP}
    costs = {
        "fio": paired_against(samples, DISK, KEYS, against, ("throughput",)),
        "compression": {FSCRYPT: {"time level=3": [np.log(1.1) + 0.01 * (i % 2) for i in range(5)]}},
    }
    pairs = {"fio": {k: against.get(k, DISK) for k in KEYS[1:]}, "compression": {FSCRYPT: LOOP}}
    left = {"fio": left_out(samples, DISK, KEYS, against, ("throughput",))} if plausible else None
    workloads, cases, dropped = across(costs, pairs, left)[(FSCRYPT, LOOP)]
    return settle_layer(cases, 0.05, 10, workloads=workloads, left_out=dropped)


def test_direct_io_on_fscrypt_is_left_out_of_the_layer_and_never_its_costliest():
    samples = fio_samples(direct=True)
    found = left_out(samples, DISK, KEYS, loop_twins(samples, KEYS), ("throughput",))
    # both fio cases of fscrypt are served buffered; no other variant has a reason
    assert set(found) == {FSCRYPT}
    assert set(found[FSCRYPT]) == {
        "throughput bs=4k rw=randread direction=read",
        "throughput bs=1m rw=read direction=read",
    }
    assert all("direct I/O served buffered on fscrypt" in why for why in found[FSCRYPT].values())

    # what the layer said before: the implausible 30x is its costliest case and pulls its mean
    naive = fscrypt_layer(direct=True, plausible=False)
    assert naive.costliest == "fio: throughput bs=4k rw=randread direction=read"
    layer = fscrypt_layer(direct=True)
    assert list(layer.cases) == ["compression: time level=3"]
    assert layer.costliest == "compression: time level=3"
    assert set(layer.left_out) == {f"fio: {label}" for label in found[FSCRYPT]}
    assert abs(layer.headline.estimate - np.log(1.1)) < 0.02
    said = layer.describe()
    assert "2 cases left out as implausible (direct I/O served buffered on fscrypt)" in said
    assert "randread" not in said
    assert layer.claim("fio", "throughput bs=4k rw=randread direction=read") == LEFT_OUT
    # the record keeps it: read back, the same words
    again = LayerSettlement.from_record({"layer": json.loads(json.dumps(layer.as_dict()))})
    assert again.describe() == said


def test_buffered_jobs_on_fscrypt_stay_in_the_layer():
    """The same figures without O_DIRECT: nothing to leave out, the 30x is the layer's costliest."""
    samples = fio_samples(direct=False)
    assert left_out(samples, DISK, KEYS, loop_twins(samples, KEYS), ("throughput",)) == {}
    layer = fscrypt_layer(direct=False)
    assert layer.left_out == {}
    assert layer.costliest == "fio: throughput bs=4k rw=randread direction=read"
    assert "left out" not in layer.describe()


def test_a_layer_whose_every_case_is_implausible_says_so_and_claims_nothing():
    samples = fio_samples(direct=True)
    against = loop_twins(samples, KEYS)
    costs = {"fio": paired_against(samples, DISK, KEYS, against, ("throughput",))}
    pairs = {"fio": {k: against.get(k, DISK) for k in KEYS[1:]}}
    left = {"fio": left_out(samples, DISK, KEYS, against, ("throughput",))}
    workloads, cases, dropped = across(costs, pairs, left)[(FSCRYPT, LOOP)]
    layer = settle_layer(cases, 0.05, 10, workloads=workloads, left_out=dropped)
    assert not layer.settled and layer.costliest is None
    assert (
        layer.describe()
        == "no case to settle: all 2 cases left out as implausible (direct I/O served buffered on fscrypt)"
    )
