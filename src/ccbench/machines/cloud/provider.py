"""The one interface every cloud's adapter implements, and what a run stamps on what it makes.

Every resource a run creates carries the run's tags (labels on GCP) from its create call on, so
that what a killed run left is found by tag alone: RUN_TAG (the run id), OWNER_TAG, EXPIRY_TAG (Unix
seconds after which anyone's sweep may delete it) and ARM_TAG. Nothing without RUN_TAG is ever
touched."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ccbench.errors import CCBenchError

RUN_TAG = "ccbench-run"
OWNER_TAG = "ccbench-owner"
EXPIRY_TAG = "ccbench-expiry"
ARM_TAG = "ccbench-arm"


class CloudError(CCBenchError):
    """A cloud refused or failed a call: the provider's own word, in one line."""


class StopWaiting(Exception):  # noqa: N818 (a request, not a failure)
    """A second stop signal during the teardown: stop waiting (every deletion was sent already)."""


@dataclass(frozen=True)
class RunContext:
    """What every request of one run shares."""

    run_id: str
    owner: str
    #: Unix seconds: after this a sweep deletes the run's resources whoever made them
    expiry: int
    #: the lifetime cap the cloud itself enforces where it can (GCP maxRunDuration), in seconds
    lifetime_s: int
    ssh_public_key: str
    #: ids of shared resources made at launch (AWS security group, Azure NIC ids), by name
    made: dict[str, str] = field(default_factory=dict)
    #: the addresses SSH may come from (one CIDR): the security group's, the NSG's, the firewall's
    ssh_from: str = "<--ssh-from CIDR>"
    #: per instance name, the host key pair made for it (private text, public line)
    host_keys: dict[str, tuple[str, str]] = field(default_factory=dict)

    def tags(self, arm: str = "") -> dict[str, str]:
        tags = {RUN_TAG: self.run_id, OWNER_TAG: self.owner, EXPIRY_TAG: str(self.expiry)}
        if arm:
            tags[ARM_TAG] = arm
        return tags

    def user_data(self, name: str, shutdown_minutes: int = 0) -> str:
        """The instance's #cloud-config: the run's user key, the host key made for it."""
        from ccbench.machines.cloud.access import SAMPLE_HOST_PRIVATE, SAMPLE_HOST_PUBLIC, cloud_config

        private, public = self.host_keys.get(name, (SAMPLE_HOST_PRIVATE, SAMPLE_HOST_PUBLIC))
        return cloud_config(self.ssh_public_key, private, public, shutdown_minutes)


def instance_name(run_id: str, arm: str, replica: int) -> str:
    """An instance's name: label-safe on every cloud, 63 characters at most."""
    clean = "".join(c if c.isalnum() else "-" for c in arm.lower())
    return f"ccb-{run_id}-{clean}-{replica}"[:63].rstrip("-")


@dataclass(frozen=True)
class Found:
    """A resource carrying RUN_TAG, as a listing saw it."""

    kind: str
    id: str
    run_id: str
    expiry: int
    where: str = ""


@dataclass
class Launched:
    """One instance of an arm: its id, its address, and the CC flag the cloud returned."""

    arm: str
    replica: int
    id: str
    address: str = ""
    cloud_says: dict[str, Any] = field(default_factory=dict)
    #: the instance's name (the key of its host key in the run's context)
    name: str = ""


class Provider(ABC):
    """One cloud. ``request`` is pure (the golden files check it); the rest call the cloud through
    its SDK, imported on first use, with credentials from the SDK's own chain only."""

    name: str = ""

    def instance_name(self, run_id: str, arm: str, replica: int) -> str:
        return instance_name(run_id, arm, replica)

    @abstractmethod
    def request(self, arm, replica: int, ctx: RunContext) -> dict[str, Any]:
        """The exact create request this arm's instance sends (the body or the call's parameters)."""

    @abstractmethod
    def preflight(self, study) -> list[str]:
        """Quota, offers and image, one line per problem (the provider's word where it refused)."""

    @abstractmethod
    def prepare(self, ctx: RunContext, journal) -> None:
        """Create what the run's instances share (key, network), each journaled before its call."""

    @abstractmethod
    def launch(self, arm, replica: int, ctx: RunContext, journal) -> Launched:
        """Create one instance (journaled before the call) and return it."""

    def address(self, launched: Launched, timeout_s: float = 600.0) -> str:
        """The instance's public address once it has one (the launch's answer carries it on Azure)."""
        return launched.address

    @abstractmethod
    def tagged(self) -> list[Found]:
        """Every resource in the study's region that carries RUN_TAG."""

    @abstractmethod
    def destroy(self, found: list[Found]) -> list[str]:
        """Send the deletion of each of these resources without waiting for any; one line each."""

    @abstractmethod
    def settle(self, found: list[Found]) -> None:
        """Wait until these (deleted) instances are gone: what they used can go only then."""
