"""Reading an Ansible inventory (INI or YAML) for the fleet, with Ansible's own parser.

``ansible-inventory --list`` does the parsing (so every inventory Ansible accepts works, group
variables included); this module checks what ccbench needs before anything is started, and
turns each problem into a one-line error naming the file and the host.

Host variables read: ``ccbench_label`` (default: the inventory hostname), ``ccbench_baseline``,
``ccbench_workdir``, ``ccbench_components``, and Ansible's connection variables. Values of other
variables (passwords, tokens) are kept only in Ansible's own hands: nothing here stores them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.errors import CCBenchError, EnvironmentProblem

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


class InventoryError(CCBenchError):
    """The inventory cannot be used: syntax, a host without an address, a missing key, two baselines."""


@dataclass
class FleetHost:
    name: str                 # the inventory hostname
    label: str                # the configuration name in the comparison
    address: str
    baseline: bool = False
    user: str | None = None
    port: int | None = None
    connection: str = "ssh"
    workdir: str | None = None
    components: list[str] = field(default_factory=list)

    def public(self) -> dict:
        """What fleet.json records about the host: no credentials, no key paths."""
        return {"inventory_hostname": self.name, "label": self.label, "address": self.address,
                "user": self.user, "port": self.port, "connection": self.connection,
                "baseline": self.baseline, "components": self.components}


@dataclass
class Inventory:
    path: Path
    hosts: list[FleetHost]

    @property
    def baseline(self) -> FleetHost:
        return next((h for h in self.hosts if h.baseline), self.hosts[0])

    def by_name(self, name: str) -> FleetHost:
        return next(h for h in self.hosts if h.name == name)


def ansible_tool(name: str) -> str:
    """Path of an Ansible command-line tool: beside this Python first (the project's venv)."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise EnvironmentProblem(
            f"{name} is not installed: install the fleet component (bash scripts/setup.sh --with fleet, "
            "or pip install 'ccbench[fleet]')"
        )
    return found


def _as_bool(value, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InventoryError(f"{where}: ccbench_baseline={value!r} is not true or false")


def _resolves(name: str, timeout_s: float = 3.0) -> bool:
    outcome = []

    def lookup():
        try:
            socket.getaddrinfo(name, None)
            outcome.append(True)
        except (OSError, UnicodeError):
            outcome.append(False)

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(outcome and outcome[0])


def _components(value, where: str) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise InventoryError(f"{where}: ccbench_components must be a list of names or a comma-separated string")
    return [i.strip() for i in items if i.strip()]


def read_inventory(path: str | os.PathLike, limit: str | None = None) -> Inventory:
    """The hosts of the inventory at ``path`` (restricted to ``limit``, an Ansible host pattern),
    checked; raises InventoryError (exit 2) naming the file and host."""
    path = Path(path)
    if not path.is_file():
        raise InventoryError(f"inventory {path}: no such file; pass an Ansible inventory (INI or YAML)")
    argv = [ansible_tool("ansible-inventory"), "-i", str(path), "--list"]
    if limit:
        argv += ["--limit", limit]
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
           "ANSIBLE_INVENTORY_ENABLED": "ini,yaml,toml", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "False"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        raise InventoryError(f"inventory {path}: {_first_error(done.stderr, path)}")
    try:
        document = json.loads(done.stdout)
    except ValueError:
        raise InventoryError(f"inventory {path}: ansible-inventory printed no inventory") from None
    hostvars = (document.get("_meta") or {}).get("hostvars") or {}
    names = _hosts_in(document)
    if limit and not names:
        raise InventoryError(f"inventory {path}: --limit {limit!r} matches no host")
    if not names:
        raise InventoryError(f"inventory {path}: no hosts")
    hosts = [_host(path, name, hostvars.get(name) or {}) for name in names]
    labels: dict[str, str] = {}
    for host in hosts:
        if host.label in labels:
            raise InventoryError(f"inventory {path}: hosts {labels[host.label]} and {host.name} have the same "
                                 f"ccbench_label {host.label!r}; labels name the configurations and must differ")
        labels[host.label] = host.name
    baselines = [h.name for h in hosts if h.baseline]
    if len(baselines) > 1:
        raise InventoryError(f"inventory {path}: hosts {' and '.join(baselines)} both set ccbench_baseline; "
                             "set it on one host")
    return Inventory(path.resolve(), hosts)


def _first_error(stderr: str, path: Path) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # each parser's complaint; the one for the file's own format says what is wrong
    reasons = dict(re.findall(r"Failed to parse inventory with '(\w+)' plugin: (.+)", stderr))
    origin = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Origin:")), "")
    expected = {".ini": "ini", ".cfg": "ini", ".yml": "yaml", ".yaml": "yaml", ".toml": "toml"}.get(path.suffix.lower())
    reason = reasons.get(expected) or (reasons.get("ini") if expected is None else None) or next(iter(reasons.values()), None)
    if reason:
        where = f" at {origin}" if origin and origin != str(path.resolve()) and origin != str(path) else ""
        return f"{reason}{where} (fix the inventory)"[:500]
    for line in lines:
        if "ERROR" in line or "Error" in line or "error" in line:
            text = re.sub(r"^\[?ERROR\]?:?\s*", "", line)
            return text[:400] + " (fix the inventory)"
    return (lines[0][:400] if lines else "ansible-inventory failed") + " (fix the inventory)"


def _hosts_in(document: dict) -> list[str]:
    """Hosts in the order the inventory lists them (groups walked from 'all')."""
    order: list[str] = []

    def walk(group: str, seen: set[str]):
        if group in seen:
            return
        seen.add(group)
        entry = document.get(group) or {}
        for host in entry.get("hosts", []):
            if host not in order:
                order.append(host)
        for child in entry.get("children", []):
            walk(child, seen)

    walk("all", set())
    return order


def _host(path: Path, name: str, variables: dict) -> FleetHost:
    where = f"inventory {path}: host {name}"
    label = str(variables.get("ccbench_label", name))
    if not _LABEL.match(label):
        raise InventoryError(f"{where}: ccbench_label {label!r}: use letters, digits, '.', '_' or '-' (it names a directory)")
    connection = str(variables.get("ansible_connection", "ssh"))
    address = variables.get("ansible_host")
    if connection == "local":
        address = address or "localhost"
    elif not address:
        try:
            ipaddress.ip_address(name)
            address = name
        except ValueError:
            if not _resolves(name):
                raise InventoryError(f"{where} has no address: set ansible_host=<IP or DNS name> "
                                     f"({name!r} does not resolve)") from None
            address = name
    for key in ("ansible_ssh_private_key_file", "ansible_private_key_file"):
        key_file = variables.get(key)
        if key_file and not Path(os.path.expanduser(str(key_file))).is_file():
            raise InventoryError(f"{where}: {key}={key_file} does not exist; point it at the private key")
    port = variables.get("ansible_port") or variables.get("ansible_ssh_port")
    try:
        port = int(port) if port is not None else None
    except (TypeError, ValueError):
        raise InventoryError(f"{where}: ansible_port={port!r} is not a number") from None
    workdir = variables.get("ccbench_workdir")
    return FleetHost(
        name=name, label=label, address=str(address),
        baseline=_as_bool(variables.get("ccbench_baseline", False), where),
        user=variables.get("ansible_user") or variables.get("ansible_ssh_user"), port=port, connection=connection,
        workdir=str(workdir) if workdir else None,
        components=_components(variables.get("ccbench_components"), where),
    )
