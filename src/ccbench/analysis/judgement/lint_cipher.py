"""The lint's check of encryption against its own cipher (docs/trust.md, "Lint"): a protection whose
implied cipher speed is far below the cipher's speed measured in the same run does much more than
encrypt. Pure functions over the comparison's rows; ccbench.analysis.judgement.lint gathers them with the rest."""

from __future__ import annotations

from typing import Any

from ccbench.probe.lint import MEDIUM, Finding, make_finding

#: a protection whose implied cipher speed (see slow_cipher) is below this share of the cipher's
#: speed measured in the same run does far more than encrypt; measured here, the secure channel
#: reaches 0.89 of the AEAD ceiling and rustls TLS 0.50, so 0.2 leaves room for a busy machine
CIPHER_SHARE_FLOOR = 0.2


# ---- encryption far below the cipher's own speed measured in the same run -------------------------
#
# The time a protection adds per byte (1/protected - 1/unprotected throughput, same case, same
# machine) is the time its cipher would need if the cipher were all it added: the "implied cipher
# speed". Far below the cipher's speed measured in the same run, the protection does much more than
# encrypt (another cipher suite, a path without the CPU's AES instructions, small sectors, a sync
# path): a likely misconfiguration. A software-only cipher is slow in both and is not flagged here
# (that is the software-AES cause, ccbench.analysis.judgement.causes).

#: the transport benchmark's one-core AEAD seal+open ceiling (ccchannel-bench), measured in the run
TRANSPORT_CEILING = "aead_seal_open"
#: the kernel cipher's speed measured when a storage variant was set up (ccbench.probe.crypto)
STORAGE_CEILING = "storage_cipher_MBps"
THROUGHPUT = "throughput"
#: the unprotected stand-in of each axis, the closest first: ext4-loop is the encrypted variants'
#: loop-file stack without the cipher
UNPROTECTED = {"transport": ("plain",), "storage": ("ext4-loop", "disk")}


def _median(values: Any) -> float | None:
    values = sorted(float(v) for v in values if v is not None and v == v)
    return values[len(values) // 2] if values else None


def implied_cipher_speed(protected: float, unprotected: float) -> float | None:
    """MB/s the added time per byte corresponds to; None when the protection added no time."""
    if protected <= 0 or unprotected <= 0 or protected >= unprotected:
        return None
    return 1 / (1 / protected - 1 / unprotected)


def _throughputs(rows: Any, axis: str) -> dict[tuple[str, str], dict[str, float]]:
    """{(workload, params): {axis value: median throughput}} of one machine's measured rows."""
    data = rows[(rows["metric"] == THROUGHPUT) & rows[axis].notna()]
    out: dict[tuple[str, str], dict[str, float]] = {}
    for (workload, params, value), group in data.groupby(["workload", "params", axis], sort=False):
        out.setdefault((str(workload), str(params)), {})[str(value)] = _median(group["value"]) or 0.0
    return out


def _bulk_cases(cases: dict[tuple[str, str], dict[str, float]], axis: str) -> dict[tuple[str, str], dict[str, float]]:
    """Per workload, the case where the unprotected side moved the most bytes per second (1 MiB
    messages, 1m sequential I/O): there per-message and per-request costs weigh least, and the
    time added per byte is the closest to the cipher's."""
    best: dict[str, tuple[float, tuple[str, str]]] = {}
    for case, speeds in cases.items():
        base = next((speeds[b] for b in UNPROTECTED[axis] if b in speeds), None)
        if base is not None and (case[0] not in best or base > best[case[0]][0]):
            best[case[0]] = (base, case)
    return {case: cases[case] for _speed, case in best.values()}


def _slow(machine: str, axis: str, case: tuple[str, str], value: str, speeds: dict, ceiling: float) -> Finding | None:
    base = next((b for b in UNPROTECTED[axis] if b in speeds), None)
    if base is None:
        return None
    implied = implied_cipher_speed(speeds[value], speeds[base])
    if implied is None or implied >= CIPHER_SHARE_FLOOR * ceiling:
        return None
    return make_finding(
        "slow-cipher",
        MEDIUM,
        f"{machine}: {value} costs as much time per byte as a cipher of {implied:.0f} MB/s, "
        f"{implied / ceiling:.0%} of the cipher speed measured in the same run ({ceiling:.0f} MB/s) "
        f"({case[0]} {case[1]}: {speeds[value]:.0f} against {speeds[base]:.0f} MB/s on {base}): far more than its "
        "cipher explains, a likely misconfiguration",
        {
            machine: {
                axis: value,
                "workload": case[0],
                "case": case[1],
                "throughput_MBps": round(speeds[value], 1),
                f"{base}_throughput_MBps": round(speeds[base], 1),
                "implied_cipher_MBps": round(implied, 1),
                "cipher_MBps_measured": round(ceiling, 1),
            }
        },
        "check what serves the layer: the negotiated cipher suite and AES instructions (transport), the cipher, "
        "sector size and mount options (storage)",
    )


def slow_cipher(frame: Any) -> list[Finding]:
    """Per machine: a protected transport or encrypted storage whose added time per byte is far
    more than the cipher's speed measured in the same run explains."""
    if frame is None or frame.empty:
        return []
    # only the few rows that can matter are copied out of what may be millions
    data = frame[frame["metric"].isin([THROUGHPUT, TRANSPORT_CEILING]) & ~frame["warmup"]]
    findings = []
    for machine, rows in data.groupby("machine", sort=False):
        ceilings = {"transport": _median(rows.loc[rows["metric"] == TRANSPORT_CEILING, "value"])}
        if STORAGE_CEILING in rows:
            by_storage = rows.dropna(subset=[STORAGE_CEILING]).groupby("storage")[STORAGE_CEILING]
            ceilings.update({f"storage:{name}": _median(values) for name, values in by_storage})
        for axis in ("transport", "storage"):
            if not any(speed for name, speed in ceilings.items() if name.partition(":")[0] == axis):
                continue  # no cipher speed to hold a throughput against (and a fleet's many series to skip)
            for case, speeds in _bulk_cases(_throughputs(rows, axis), axis).items():
                for value in speeds:
                    ceiling = ceilings.get(axis if axis == "transport" else f"storage:{value}")
                    if not ceiling or value in UNPROTECTED[axis]:
                        continue
                    finding = _slow(str(machine), axis, case, value, speeds, ceiling)
                    if finding:
                        findings.append(finding)
    return findings
