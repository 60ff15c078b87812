"""SSH into a run's instances without trust on first use. Per run, ccbench makes (with ssh-keygen,
never its own crypto) a client key pair and, per instance, a host key pair; each instance gets the
client's public key and its own host private key at boot through its cloud's user-data (a
``#cloud-config`` document: AWS ``UserData``, GCP metadata ``user-data``, Azure
``osProfile.customData``), and the run's ``known_hosts`` names each instance's address with the
host public key made for it, so SSH checks the host key strictly from the first connection.

The secrets live in the run's ``access/`` directory (mode 0700, each key 0600) and are deleted at the
teardown (``forget``); ``known_hosts`` and the public keys stay as the run's record."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: the login every instance gets (cloud-config ``users``), with sudo without a password
USER = "ccbench"
#: what the printed requests show in place of the keys a real run makes (never a real key)
SAMPLE_HOST_PRIVATE = "<the instance's own host private key, made for the run>"
SAMPLE_HOST_PUBLIC = "<its host public key>"


def _keygen(path: Path, comment: str) -> str:
    """An ed25519 key pair at ``path`` (0600) by ssh-keygen; its public line."""
    path.unlink(missing_ok=True)
    Path(f"{path}.pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True, capture_output=True
    )
    path.chmod(0o600)
    return Path(f"{path}.pub").read_text().strip()


@dataclass
class Access:
    """One run's keys and known_hosts."""

    directory: Path

    @property
    def key(self) -> Path:
        return self.directory / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def public_key(self) -> str:
        return Path(f"{self.key}.pub").read_text().strip()

    def make(self, run_id: str) -> Access:
        if not shutil.which("ssh-keygen"):
            from ccbench.errors import EnvironmentProblem

            raise EnvironmentProblem("ssh-keygen is not installed (apt-get install openssh-client); nothing launched")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        _keygen(self.key, f"ccbench-run-{run_id}")
        self.known_hosts.write_text("")
        self.known_hosts.chmod(0o600)
        return self

    def host_key(self, instance: str) -> tuple[str, str]:
        """A new host key pair for ``instance``: (private key text, public line)."""
        hosts = self.directory / "hosts"
        hosts.mkdir(mode=0o700, exist_ok=True)
        path = hosts / f"{instance}_ed25519"
        public = _keygen(path, f"{instance}@ccbench")
        return path.read_text(), public

    def host_public(self, instance: str) -> str:
        return Path(f"{self.directory / 'hosts' / instance}_ed25519.pub").read_text().strip()

    def trust(self, address: str, public_line: str, port: int = 22) -> None:
        """Name ``address`` in known_hosts with the host key made for it (before any connection)."""
        where = address if port == 22 else f"[{address}]:{port}"
        key_type, key = public_line.split()[:2]
        with open(self.known_hosts, "a", encoding="utf-8") as handle:
            handle.write(f"{where} {key_type} {key}\n")

    def forget(self) -> list[str]:
        """Delete the run's private keys (the client's and every host's); the names of what went."""
        gone = []
        for path in [self.key, *sorted((self.directory / "hosts").glob("*_ed25519"))]:
            if path.exists():
                path.unlink()
                gone.append(path.name)
        return gone

    def ssh_options(self) -> list[str]:
        """The client options every connection of the run uses: the run's key, strict host keys."""
        return [
            "-i", str(self.key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10",
        ]  # fmt: skip


def cloud_config(user_public: str, host_private: str, host_public: str, shutdown_minutes: int = 0) -> str:
    """The user-data every instance boots with: the run's user with the client's public key, the
    image's own host keys deleted and the run's one for this instance installed (cloud-init's
    ``ssh`` module: ``ssh_deletekeys``, ``ssh_keys``), and on AWS the power-off at the lifetime cap.
    JSON is YAML, so the document is written with json (no quoting of a key's lines by hand)."""
    config: dict = {
        "users": [
            "default",
            {
                "name": USER,
                "shell": "/bin/bash",
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "ssh_authorized_keys": [user_public],
            },
        ],
        "ssh_deletekeys": True,
        "ssh_genkeytypes": [],
        "ssh_keys": {"ed25519_private": host_private, "ed25519_public": host_public},
    }
    if shutdown_minutes:
        config["bootcmd"] = [["shutdown", "-P", f"+{shutdown_minutes}"]]
    return "#cloud-config\n" + json.dumps(config, indent=1) + "\n"


def parse_cloud_config(text: str) -> dict:
    """The document ``cloud_config`` wrote (for the tests' stand-in instances and the records)."""
    head, _, body = text.partition("\n")
    if head.strip() != "#cloud-config":
        raise ValueError("not a #cloud-config document")
    return json.loads(body)


def b64(text: str) -> str:
    """Azure's customData is base64 (EC2's UserData boto3 encodes itself)."""
    return base64.b64encode(text.encode()).decode()


def private_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777
