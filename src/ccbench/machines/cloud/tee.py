"""A cloud's word that an instance is confidential is a fact to record, not evidence: the guest's own
probe (ccbench.probe.tee) decides. A confidential arm whose guest shows no TEE, or another one, stops
the study; so does a plain arm whose guest shows one (it would be no baseline)."""

from __future__ import annotations

from typing import Any

from ccbench.basics.errors import CCBenchError


class NoTee(CCBenchError):
    """The guest does not show the TEE its arm was launched for."""


def check_guest(arm: str, kind: str, probe_document: dict[str, Any], cloud_says: dict[str, Any]) -> dict[str, Any]:
    """The facts a bundle records (what the cloud said, what the guest shows, the evidence), or NoTee."""
    tee = probe_document.get("tee") or {}
    shows = tee.get("technology", "unknown")
    evidence = [f"{e.get('source', '?')}: {e.get('signal', '?')}" for e in tee.get("evidence", [])]
    facts = {"arm": arm, "kind": kind, "cloud_says": cloud_says, "guest_shows": shows, "evidence": evidence}
    said = ", ".join(f"{k}={v}" for k, v in cloud_says.items()) or "nothing"
    if kind == "plain":
        if shows not in ("none", "unknown"):
            raise NoTee(
                f"arm '{arm}' (plain): its guest shows {shows} ({'; '.join(evidence)}); a plain arm is no baseline then: stopping the study"
            )
        return facts
    if shows != kind:
        seen = "no TEE" if shows in ("none", "unknown") else shows
        notes = "; ".join(tee.get("notes", [])[:1])
        raise NoTee(
            f"arm '{arm}' ({kind}): its guest shows {seen} (probe: {shows}{'; ' + notes if notes else ''}); "
            f"the cloud said {said}, which is not evidence: stopping the study"
        )
    return facts
