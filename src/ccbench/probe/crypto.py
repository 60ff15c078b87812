"""Which implementation does the cryptographic work: the kernel's cipher driver and the CPU's instructions.

A storage-encryption cost measured on a kernel that serves AES in software is not what a kernel
with ``xts-aes-aesni`` or VAES shows. To attribute a cost to its cause, record the driver that
served the cipher (``/proc/crypto``) and the CPU's crypto features (``/proc/cpuinfo`` flags).

The kernel picks, for a cipher name such as ``xts(aes)``, the highest-priority registered
implementation whose self-test passed. Templates (``xts(...)``, ``cts(cbc(...))``, ``gcm_base(...)``)
are instantiated on first use: on a kernel with only ``aes-generic`` and ``aes-fixed-time``,
``xts(ecb(aes-fixed-time))`` appears in ``/proc/crypto`` only after an fscrypt policy or a dm-crypt
mapping that uses it is live. So read it AFTER the mapping or policy is set up
(``kernel_cipher(name)``); before that, ``kernel_cipher`` falls back to the best ``aes`` cipher and
says so (``instantiated: False``).

``parse_proc_crypto`` and ``serving_driver`` are pure (for fixtures and captured snapshots);
``cause_text`` words the cause so that compare and the report say the same thing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ccbench.probe.sources import Sources

#: CPU flags (x86 /proc/cpuinfo names) that decide how fast AES, GHASH and SHA run
CPU_CRYPTO_FLAGS = ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "sha_ni", "avx2", "avx512f")

#: the kernel cipher name behind a storage cipher as the variants record it
KERNEL_CIPHER_OF = {
    "aes-256-xts": "xts(aes)",
    "aes-xts-plain64": "xts(aes)",
    "aes-xts-plain": "xts(aes)",
    "aes-256-cts": "cts(cbc(aes))",
    "aes-256-gcm": "gcm(aes)",
    "aes-256-hctr2": "hctr2(aes)",
    "adiantum": "adiantum(xchacha12,aes)",
}

_LABELS = {
    "xts(aes)": "AES-XTS",
    "cts(cbc(aes))": "AES-CTS",
    "gcm(aes)": "AES-GCM",
    "aes": "AES",
    "ctr(aes)": "AES-CTR",
    "cbc(aes)": "AES-CBC",
    "ecb(aes)": "AES-ECB",
    "hctr2(aes)": "AES-HCTR2",
}

# Implementations that use the CPU's AES instructions or a crypto engine (searched in every part of
# a driver name, templates included: "gcm_base(ctr-aes-aesni,ghash-clmulni)").
_HARDWARE = [
    (re.compile(r"vaes"), "VAES (vector AES) instructions"),
    (re.compile(r"aesni"), "AES-NI instructions"),
    (re.compile(r"(^|[-_])ce($|[-_])|-ce\b"), "ARMv8 Crypto Extensions"),
    (re.compile(r"s390|paes"), "s390 CPACF instructions"),
    (re.compile(r"p8_aes|p10"), "POWER vector crypto instructions"),
    (re.compile(r"zvkned"), "RISC-V vector crypto instructions"),
    (
        re.compile(r"ccp|qat|caam|safexcel|atmel|sun8i|omap|mxs-dcp|talitos|hisi|octeontx|nx-"),
        "a crypto engine (offload)",
    ),
]
# Software AES: lookup tables (aes-generic), constant-time without tables (aes-fixed-time), scalar
# assembler (aes-asm on i586, aes-arm, aes-arm64), bit-sliced SIMD without AES instructions (neonbs).
_SOFTWARE = [
    (re.compile(r"aes-fixed-time"), "software AES, constant-time (aes-fixed-time)"),
    (re.compile(r"aes-generic"), "software AES, table-based (aes-generic)"),
    (re.compile(r"aes-lib|aes-asm|aes-arm64|aes-arm\b|aes-arm$"), "software AES (scalar)"),
    (re.compile(r"neonbs"), "software AES, bit-sliced NEON (no AES instructions)"),
]


def parse_proc_crypto(text: str) -> list[dict[str, Any]]:
    """/proc/crypto's blocks as dicts (``priority`` and ``refcnt`` as int; other values as strings)."""
    entries: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if current:
                entries.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in ("priority", "refcnt"):
            try:
                current[key] = int(value)
            except ValueError:
                current[key] = value
        else:
            current[key] = value
    return entries


def implementation(driver: str) -> tuple[bool | None, str]:
    """(accelerated, what it is) for a driver name; accelerated is None when the name is not known."""
    parts = [p for p in re.split(r"[(),]", driver) if p]
    for pattern, description in _HARDWARE:
        if any(pattern.search(part) for part in parts):
            return True, description
    for pattern, description in _SOFTWARE:
        if any(pattern.search(part) for part in parts):
            return False, description
    return None, f"unrecognised driver {driver!r}"


def serving_driver(entries: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The entry the kernel serves ``name`` with: highest priority among passed self-tests, not internal."""
    candidates = [
        e
        for e in entries
        if e.get("name") == name and e.get("selftest", "passed") == "passed" and e.get("internal", "no") != "yes"
    ]
    if not candidates:
        return None
    # ties: the first listed (/proc/crypto lists the most recently registered first, as the kernel's list)
    best = max(
        candidates,
        key=lambda e: (e.get("priority", 0) if isinstance(e.get("priority"), int) else 0, -candidates.index(e)),
    )
    accelerated, description = implementation(best.get("driver", ""))
    return {
        "name": name,
        "driver": best.get("driver"),
        "module": best.get("module"),
        "priority": best.get("priority"),
        "accelerated": accelerated,
        "implementation": description,
        "instantiated": True,
    }


def cipher_from_text(text: str, name: str) -> dict[str, Any] | None:
    """``serving_driver`` for ``name`` in a /proc/crypto text; when the template is not instantiated yet,
    the best single-block ``aes`` cipher with ``instantiated: False`` (what a template would be built on)."""
    entries = parse_proc_crypto(text)
    found = serving_driver(entries, name)
    if found is not None:
        return found
    if "aes" in name:
        base = serving_driver(entries, "aes")
        if base is not None:
            base = dict(base)
            base.update(
                {
                    "name": name,
                    "instantiated": False,
                    "note": f"{name} not in /proc/crypto yet (instantiated on first use); "
                    f"the AES cipher it would be built on is {base['driver']}",
                }
            )
            return base
    return None


def kernel_cipher(name: str, root: str | Path = "/") -> dict[str, Any] | None:
    """The driver serving ``name`` now (read <root>/proc/crypto: call after the mapping or policy is live)."""
    text = Sources(root=Path(root)).read_text("/proc/crypto")
    return None if text is None else cipher_from_text(text, name)


def kernel_cipher_name(storage_cipher: str | None) -> str | None:
    """``xts(aes)`` for ``AES-256-XTS`` or ``aes-xts-plain64`` (None for a userspace cipher or unknown)."""
    if not storage_cipher:
        return None
    return KERNEL_CIPHER_OF.get(storage_cipher.lower())


def storage_variant_info(storage_cipher: str | None, root: str | Path = "/") -> dict[str, Any]:
    """The variant-info keys for a kernel-encrypted storage variant (call once the variant is live):
    ``storage_cipher_driver`` and ``storage_cipher_accelerated``; {} when the cipher is not the kernel's."""
    name = kernel_cipher_name(storage_cipher)
    if name is None:
        return {}
    found = kernel_cipher(name, root)
    if found is None:
        return {}
    info = {"storage_cipher_driver": found["driver"], "storage_cipher_accelerated": found["accelerated"]}
    if not found["instantiated"]:
        info["storage_cipher_driver_note"] = found["note"]
    if Path(root).resolve() == Path("/"):
        speed = kernel_cipher_speed(name)
        if "MBps" in speed:
            info["storage_cipher_MBps"] = speed["MBps"]
        else:
            info["storage_cipher_MBps_note"] = speed["reason"]
    return info


#: bytes of key for each kernel storage cipher measured (XTS: two AES-256 keys, as fscrypt and LUKS2's
#: default aes-xts-plain64 with a 512-bit key use)
KEY_BYTES = {"xts(aes)": 64, "cts(cbc(aes))": 32}


def kernel_cipher_speed(
    name: str = "xts(aes)", seconds: float = 0.25, limit_bytes: int = 256 * 2**20, message: int = 65536
) -> dict[str, Any]:
    """The kernel's own speed for ``name`` (encrypting ``message``-byte messages through AF_ALG, the
    kernel's crypto API for user space, so the driver the kernel picks for the storage variant does
    the work), for at most ``seconds`` or ``limit_bytes``: {"MBps", "bytes", "seconds"}, or
    {"reason"} where the kernel offers no AF_ALG (CONFIG_CRYPTO_USER_API_SKCIPHER) or not the cipher."""
    import os
    import socket
    import time

    if not hasattr(socket, "AF_ALG"):
        return {"reason": "this Python has no AF_ALG sockets"}
    try:
        with socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET, 0) as algorithm:
            algorithm.bind(("skcipher", name))
            algorithm.setsockopt(socket.SOL_ALG, socket.ALG_SET_KEY, os.urandom(KEY_BYTES.get(name, 32)))
            operation, _ = algorithm.accept()
            with operation:
                data, iv, done = bytes(message), bytes(16), 0
                start = time.perf_counter()
                while done < limit_bytes and time.perf_counter() - start < seconds:
                    operation.sendmsg_afalg([data], op=socket.ALG_OP_ENCRYPT, iv=iv)
                    done += len(operation.recv(message))
                elapsed = time.perf_counter() - start
    except OSError as exc:
        return {"reason": f"the kernel's {name} could not be measured through AF_ALG: {exc.strerror or exc}"}
    return {"MBps": round(done / elapsed / 1e6, 1), "bytes": done, "seconds": round(elapsed, 3)}


def cpu_crypto(flags: set[str] | list[str] | None) -> dict[str, bool]:
    """The crypto-relevant CPU features from /proc/cpuinfo flags (x86 names)."""
    flags = set(flags or ())
    return {flag: flag in flags for flag in CPU_CRYPTO_FLAGS}


def label(name: str) -> str:
    return _LABELS.get(name, name)


def cause_text(
    layer: str,
    *,
    driver: str | None,
    accelerated: bool | None,
    cipher: str | None = None,
    cpu: dict[str, bool] | None = None,
    library: str | None = None,
) -> str | None:
    """The likely cause, in words, when a protection layer's cipher ran without AES instructions.

    layer: "storage" or "transport". cipher: the kernel name (``xts(aes)``) or a suite
    (``TLS13_AES_256_GCM_SHA384``). None when the cipher was accelerated or nothing is known.
    """
    if accelerated is not False or not driver:
        return None
    cpu_note = ""
    if cpu and cpu.get("aes"):
        cpu_note = (
            "; this CPU has AES instructions"
            + (" (and VAES)" if cpu.get("vaes") else "")
            + (
                ", which a kernel with the aesni_intel driver would use"
                if layer == "storage"
                else ", which the library did not use"
            )
        )
    if layer == "storage":
        kind = label(cipher) if cipher else "the storage cipher"
        return (
            f"the kernel served {kind} in software ({driver}): this cost is not intrinsic to "
            f"encryption at rest{cpu_note}"
        )
    kind = cipher or "the transport cipher"
    who = library or "the TLS library"
    how = f" ({driver})" if driver != cipher else ""
    return (
        f"{who} ran {kind} without AES instructions{how}: this cost is not intrinsic to encryption in transit{cpu_note}"
    )


def cause_from_variant(variant: dict[str, Any], cpu: dict[str, bool] | None = None) -> list[str]:
    """Causes named by a sample's variant info (the shared keys storage_cipher_driver/-accelerated,
    transport_cipher/transport_aes_accelerated); [] when every cipher was accelerated or unknown."""
    causes = []
    storage = cause_text(
        "storage",
        driver=variant.get("storage_cipher_driver"),
        accelerated=variant.get("storage_cipher_accelerated"),
        cipher=kernel_cipher_name(variant.get("storage_cipher")) or "xts(aes)",
        cpu=cpu,
    )
    if storage:
        causes.append(storage)
    if variant.get("transport_aes_accelerated") is False:
        causes.append(
            cause_text(
                "transport",
                driver=variant.get("transport_cipher") or "software AES",
                accelerated=False,
                cipher=variant.get("transport_cipher"),
                cpu=cpu,
            )
            or ""
        )
    return [c for c in causes if c]


# ---- does the TLS library's AES use the CPU's instructions, and at what speed? ---------------------------

#: OpenSSL code paths chosen with OPENSSL_ia32cap (documented in OpenSSL's OPENSSL_ia32cap(3)):
#: the second word's bit 41 is CPUID(7).ECX[9] VAES; the first word's bit 57 is AES-NI.
OPENSSL_PATHS = {"default": "", "without VAES": ":~0x20000000000", "software (no AES-NI)": "~0x200000000000000"}


def parse_openssl_speed(text: str) -> float | None:
    """Throughput in MB/s from ``openssl speed -evp CIPHER -bytes N`` output (its last line, in 1000s of bytes/s)."""
    for line in reversed(text.strip().splitlines()):
        parts = line.split()
        if parts and parts[-1].endswith("k"):
            try:
                return float(parts[-1][:-1]) / 1000
            except ValueError:
                return None
    return None


def openssl_aes_speed(cipher: str = "aes-256-gcm", seconds: int = 1, block: int = 16384) -> dict[str, Any]:
    """OpenSSL's speed for ``cipher`` on its default path, without VAES, and without AES-NI (live, ~3 s).

    The verdict says whether the default path uses AES instructions at their speed: on the
    development VM the default VAES/AVX-512 path ran 50x slower than the AES-NI path, although the
    CPU flags advertise both."""
    import os
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        return {"cipher": cipher, "reason": "openssl is not installed"}
    speeds: dict[str, float | None] = {}
    for label_, mask in OPENSSL_PATHS.items():
        env = dict(os.environ)
        if mask:
            env["OPENSSL_ia32cap"] = mask
        else:
            env.pop("OPENSSL_ia32cap", None)
        try:
            done = subprocess.run(
                ["openssl", "speed", "-evp", cipher, "-seconds", str(seconds), "-bytes", str(block)],
                capture_output=True,
                text=True,
                timeout=seconds * 10 + 10,
                env=env,
            )
            speeds[label_] = parse_openssl_speed(done.stdout) if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            speeds[label_] = None
    return assess_aes_speed(cipher, speeds)


def assess_aes_speed(cipher: str, speeds: dict[str, float | None]) -> dict[str, Any]:
    """The verdict on measured speeds {"default", "without VAES", "software (no AES-NI)"} in MB/s."""
    result: dict[str, Any] = {"cipher": cipher, "MBps": {k: (round(v, 1) if v else v) for k, v in speeds.items()}}
    default, no_vaes, software = (speeds.get(k) for k in OPENSSL_PATHS)
    if not default or not software:
        result["reason"] = "openssl speed gave no number"
        return result
    best = max(v for v in (default, no_vaes, software) if v)
    result["accelerated"] = default >= 2 * software
    result["default_share_of_best"] = round(default / best, 3)
    if no_vaes and no_vaes >= 5 * default:
        result["verdict"] = (
            f"OpenSSL's default {cipher.upper()} path (VAES) runs at {default:.0f} MB/s, "
            f"{no_vaes / default:.0f}x slower than without VAES ({no_vaes:.0f} MB/s): "
            "the VAES instructions are slow on this machine (a VM that emulates or traps them?); "
            "TLS costs measured here are distorted"
        )
    elif not result["accelerated"]:
        result["verdict"] = (
            f"OpenSSL's {cipher.upper()} does not beat its software path ({default:.0f} vs {software:.0f} MB/s)"
        )
    else:
        result["verdict"] = f"OpenSSL's {cipher.upper()} uses AES instructions at {default:.0f} MB/s"
    return result
