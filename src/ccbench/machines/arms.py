"""Arms differ only in their knobs: compare the launch records (qemu.Launch.record) of a study's arms
and name everything that differs beyond the declared kind, twins and knobs."""

from __future__ import annotations

from typing import Any

#: record keys that must be equal across arms, and how a difference is named
SHARED = {
    "machine": "machine settings",
    "accel": "accelerator",
    "cpu": "CPU model",
    "qemu": "QEMU binary",
    "devices": "devices",
    "base_append": "the image's kernel command line",
}


def _image_digest(record: dict[str, Any]) -> str:
    return (record.get("image") or {}).get("digest", "")


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flat(inner, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def _undeclared_params(record: dict[str, Any]) -> list[str]:
    """Words of the kernel command line that neither the image nor the arm's knobs account for."""
    append = record.get("append", "")
    if not append:
        return []
    declared = record.get("base_append", "").split() + list((record.get("knobs") or {}).get("kernel_params", []))
    words = append.split()
    for word in declared:
        if word in words:
            words.remove(word)
    return words


def _devices_match_knobs(record: dict[str, Any]) -> list[str]:
    knobs = record.get("knobs") or {}
    problems = []
    for device in (record.get("argv") or [])[1:]:
        if not device.startswith("virtio-"):
            continue
        has = "iommu_platform=on" in device.split(",")
        if has != bool(knobs.get("iommu_platform")):
            problems.append(
                f"device {device.split(',')[0]} has iommu_platform {'on' if has else 'off'} against its knobs"
            )
    return problems


def differences(records: list[dict[str, Any]], baseline: str | None = None) -> list[str]:
    """One line per difference between an arm and the baseline arm (the one named, else the first)
    that is not its declared kind, twins or knobs; and per arm, anything in its command line its
    knobs do not declare. [] when the arms differ only in what they declare."""
    if not records:
        return []
    base = next((r for r in records if r.get("arm") == baseline), records[0])
    lines = []
    for record in records:
        name = record.get("arm", "?")
        for word in _undeclared_params(record):
            lines.append(f"arm '{name}': kernel parameter {word!r} is neither the image's nor a declared knob")
        for problem in _devices_match_knobs(record):
            lines.append(f"arm '{name}': {problem}")
        if record is base:
            continue
        if _image_digest(record) != _image_digest(base):
            lines.append(
                f"arm '{name}' boots another image than '{base.get('arm')}' "
                f"(digest {_image_digest(record) or 'unknown'} against {_image_digest(base) or 'unknown'})"
            )
        for key, what in SHARED.items():
            mine, theirs = _flat(record.get(key), key), _flat(base.get(key), key)
            for path in sorted(set(mine) | set(theirs)):
                if mine.get(path) != theirs.get(path):
                    lines.append(
                        f"arm '{name}' differs from '{base.get('arm')}' in {what} ({path}: "
                        f"{mine.get(path)!r} against {theirs.get(path)!r}), which is no declared knob"
                    )
        same_kind = record.get("kind") == base.get("kind")
        if same_kind and record.get("firmware_sha256") != base.get("firmware_sha256"):
            lines.append(
                f"arm '{name}' boots a firmware of another digest than '{base.get('arm')}' of its kind "
                f"({record.get('firmware_sha256')} against {base.get('firmware_sha256')})"
            )
        elif same_kind and record.get("firmware") != base.get("firmware"):
            lines.append(
                f"arm '{name}' boots other firmware than '{base.get('arm')}' of its kind "
                f"({record.get('firmware')} against {base.get('firmware')})"
            )
        backend, base_backend = record.get("memory_backend") or {}, base.get("memory_backend") or {}
        declared_backend = (record.get("knobs") or {}).get("memory_backend") or (base.get("knobs") or {}).get(
            "memory_backend"
        )
        if backend != base_backend and not declared_backend:
            lines.append(
                f"arm '{name}' differs from '{base.get('arm')}' in its memory backend "
                f"({backend} against {base_backend}), which is no declared knob"
            )
    return lines
