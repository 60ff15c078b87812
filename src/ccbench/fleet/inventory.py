"""Reading an Ansible inventory (an INI or YAML file, or a directory of them beside ``group_vars/``
and ``host_vars/``) for the fleet, with Ansible's own parser.

``ansible-inventory --list`` does the parsing (so every inventory Ansible accepts works, group
variables and host ranges such as ``node[1:3]`` included); this module checks what ccbench needs
before anything is started, and turns each problem into a one-line error naming the file and the
host. A second small step in Ansible's own Python (``_RESOLVE``) gives what ``--list`` does not:
the hosts in the order the inventory lists them (``--list`` puts ungrouped hosts first and sorts
the host variables), and the variables ccbench reads with their Jinja templates resolved as a
playbook would see them (``ansible_host: "{{ ... }}"``).

Host variables read: ``ccbench_label`` (default: the inventory hostname; hosts sharing one are
replicas of one configuration), ``ccbench_baseline``
(default: none, and then the first host the inventory lists is the baseline), ``ccbench_workdir``,
``ccbench_components``, ``ccbench_peer`` (the inventory hostname of the host that serves this one's
plan: the fleet starts there what the plan's workloads declare as peer services, for the run; a
host named so serves and runs no plan itself; see ``fleet/peers.py``), and Ansible's connection variables with their old spellings
(``ansible_ssh_host``, ``ansible_ssh_user``, ``ansible_ssh_port``). Values of other variables
(passwords, tokens) are kept only in Ansible's own hands: nothing here stores them, and an error
message that would quote one (Ansible's parser quotes the line it refuses) has it replaced.
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

from ccbench.basics.errors import CCBenchError, EnvironmentProblem

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
#: the variables ccbench reads (templates resolved); nothing else is asked of Ansible
_READ = (
    "ansible_host",
    "ansible_ssh_host",
    "ansible_port",
    "ansible_ssh_port",
    "ansible_user",
    "ansible_ssh_user",
    "ansible_connection",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "ccbench_label",
    "ccbench_baseline",
    "ccbench_workdir",
    "ccbench_components",
    "ccbench_peer",
)
#: variable names whose values are secrets (Ansible's password spellings, k3s's token, vault and API keys)
_SECRET_NAME = r"\w*(?:password|passwd|_pass|token|secret|api_key|private_key)(?!\w*_file)\w*"
_SECRET_ASSIGNMENT = re.compile(rf"\b({_SECRET_NAME})(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)", re.IGNORECASE)
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


class InventoryError(CCBenchError):
    """The inventory cannot be used: syntax, a host without an address, a missing key, two baselines."""


@dataclass
class FleetHost:
    name: str  # the inventory hostname
    label: str  # the configuration name in the comparison (shared by replicas)
    address: str
    baseline: bool = False
    user: str | None = None
    port: int | None = None
    connection: str = "ssh"
    workdir: str | None = None
    components: list[str] = field(default_factory=list)
    #: the inventory hostname of the host serving this one (ccbench_peer), or None
    peer: str | None = None
    #: the host's own name in fleet.json and its bundles' directory: the label, or for a replica
    #: (a label several hosts share) "<label>/<inventory hostname>"
    key: str = ""

    def __post_init__(self) -> None:
        self.key = self.key or self.label

    def public(self) -> dict:
        """What fleet.json records about the host: no credentials, no key paths."""
        return {
            "inventory_hostname": self.name,
            "label": self.label,
            "address": self.address,
            "user": self.user,
            "port": self.port,
            "connection": self.connection,
            "baseline": self.baseline,
            "components": self.components,
            "peer": self.peer,
        }


@dataclass
class Inventory:
    path: Path
    hosts: list[FleetHost]

    @property
    def baseline(self) -> FleetHost:
        """The host with ccbench_baseline (the first of them where the replicas of one label set it), else the first."""
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


def redact_secrets(text: str) -> str:
    """``text`` with the value of every secret-looking assignment (``k3s_token=...``,
    ``ansible_become_password: ...``) replaced: for messages that quote an inventory line."""
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}<redacted>", text)


def _ansible_env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
        "ANSIBLE_INVENTORY_ENABLED": "ini,yaml,toml",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
    }


def read_inventory(path: str | os.PathLike, limit: str | None = None) -> Inventory:
    """The hosts of the inventory at ``path`` (a file, or a directory as Ansible reads one;
    restricted to ``limit``, an Ansible host pattern), in the order the inventory lists them,
    checked; raises InventoryError (exit 2) naming the file and host."""
    path = Path(path)
    if not path.exists():
        raise InventoryError(
            f"inventory {path}: no such file or directory; pass an Ansible inventory "
            "(an INI or YAML file, or a directory holding one beside group_vars/ and host_vars/)"
        )
    document = _listing(path, limit)
    hostvars = (document.get("_meta") or {}).get("hostvars") or {}
    names = _hosts_in(document)
    if limit and not names:
        raise InventoryError(f"inventory {path}: --limit {limit!r} matches no host")
    if not names:
        raise InventoryError(f"inventory {path}: no hosts")
    resolved = _resolve(path, limit)
    # the inventory's own order; a host the second reading missed keeps its place from --list
    order = [name for name in resolved["order"] if name in names]
    names = order + [name for name in names if name not in order]
    hosts = [
        _host(
            path,
            name,
            {**(hostvars.get(name) or {}), **resolved["values"].get(name, {})},
            resolved["errors"].get(name, {}),
        )
        for name in names
    ]
    _name_replicas(hosts)
    _check_peers(path, hosts)
    baselines = [h for h in hosts if h.baseline]
    if len({h.label for h in baselines}) > 1:
        raise InventoryError(
            f"inventory {path}: hosts {' and '.join(h.name for h in baselines)} both set ccbench_baseline with "
            "different labels; set it on one host (or on the replicas of one label)"
        )
    return Inventory(path.resolve(), hosts)


def _check_peers(path: Path, hosts: list[FleetHost]) -> None:
    """Each ccbench_peer names another host of the inventory (as --limit leaves it), one that serves
    and is served by no one in turn."""
    names = {h.name for h in hosts}
    serving = {h.peer for h in hosts if h.peer}
    for host in hosts:
        where = f"inventory {path}: host {host.name}"
        if host.peer is None:
            continue
        if host.peer == host.name:
            raise InventoryError(f"{where}: ccbench_peer names the host itself; name the host that serves it")
        if host.peer not in names:
            raise InventoryError(
                f"{where}: ccbench_peer={host.peer} is not a host of the inventory"
                " (or --limit leaves it out): add it, or include it in --limit"
            )
        if host.name in serving:
            raise InventoryError(
                f"{where} serves another host and has a ccbench_peer itself: a host either serves or is served"
            )


def _name_replicas(hosts: list[FleetHost]) -> None:
    """Hosts sharing a ccbench_label are replicas of one configuration (docs/analysis.md, Replicas):
    each gets its own key, ``<label>/<inventory hostname>``, for its records and bundle directory,
    while the label stays the configuration's name in the comparison."""
    counts: dict[str, int] = {}
    for host in hosts:
        counts[host.label] = counts.get(host.label, 0) + 1
    for host in hosts:
        if counts[host.label] > 1:
            host.key = f"{host.label}/{re.sub(r'[^A-Za-z0-9._-]', '_', host.name)}"


def _listing(path: Path, limit: str | None) -> dict:
    """``ansible-inventory --list``: the parse (its errors as one line) and every host's variables."""
    argv = [ansible_tool("ansible-inventory"), "-i", str(path), "--list"]
    if limit:
        argv += ["--limit", limit]
    done = subprocess.run(argv, capture_output=True, text=True, env=_ansible_env(), timeout=120)
    if done.returncode != 0:
        raise InventoryError(f"inventory {path}: {redact_secrets(_first_error(done.stderr, path))}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise InventoryError(f"inventory {path}: ansible-inventory printed no inventory") from None


#: run in Ansible's own Python: the hosts in the order the inventory's files list them (Ansible's
#: inventory keeps them in parse order), and the variables ccbench reads, templated as a playbook
#: would template them (host and group variables, group_vars/ and host_vars/, hostvars and groups)
_RESOLVE = """
import json, sys
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

path, limit, keys = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
loader = DataLoader()
inventory = InventoryManager(loader=loader, sources=[path])
if limit:
    inventory.subset(limit)
selected = {host.name for host in inventory.get_hosts()}
manager = VariableManager(loader=loader, inventory=inventory)
out = {"order": [], "values": {}, "errors": {}}
for name, host in inventory._inventory.hosts.items():
    if name not in selected:
        continue
    out["order"].append(name)
    variables = manager.get_vars(host=host, include_hostvars=True)
    templar = Templar(loader=loader, variables=variables)
    for key in keys:
        if key not in variables:
            continue
        try:
            value = templar.template(variables[key])
        except Exception as exc:
            out["errors"].setdefault(name, {})[key] = (str(exc).splitlines() or [type(exc).__name__])[0]
            continue
        if not isinstance(value, (str, int, float, bool, list, type(None))):
            value = str(value)
        out["values"].setdefault(name, {})[key] = value
print(json.dumps(out, default=str))
"""


def _ansible_python() -> str:
    """The Python that runs Ansible: this one when ansible-inventory sits beside it, else the one
    its script names."""
    tool = Path(ansible_tool("ansible-inventory"))
    if tool.parent == Path(sys.executable).parent:
        return sys.executable
    try:
        first = tool.read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return sys.executable
    return first[2:].strip().split()[0] if first.startswith("#!") else sys.executable


def _resolve(path: Path, limit: str | None) -> dict:
    """The inventory's host order and ccbench's variables templated (see ``_RESOLVE``); when that
    step cannot run, --list's order and the variables as written."""
    argv = [_ansible_python(), "-c", _RESOLVE, str(path), limit or "", json.dumps(_READ)]
    empty = {"order": [], "values": {}, "errors": {}}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=_ansible_env(), timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return empty
    if done.returncode != 0:
        return empty
    try:
        document = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return empty
    return {key: document.get(key) or empty[key] for key in empty}


def _first_error(stderr: str, path: Path) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # each parser's complaint; the one for the file's own format says what is wrong
    reasons = dict(re.findall(r"Failed to parse inventory with '(\w+)' plugin: (.+)", stderr))
    origin = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Origin:")), "")
    expected = {".ini": "ini", ".cfg": "ini", ".yml": "yaml", ".yaml": "yaml", ".toml": "toml"}.get(path.suffix.lower())
    reason = (
        reasons.get(expected)
        or (reasons.get("ini") if expected is None else None)
        or next(iter(reasons.values()), None)
    )
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


def _host(path: Path, name: str, variables: dict, unresolved: dict[str, str]) -> FleetHost:
    where = f"inventory {path}: host {name}"
    for key, message in unresolved.items():
        raise InventoryError(
            f"{where}: {key} is a template Ansible cannot resolve ({redact_secrets(message)}); "
            "define what it uses or give a plain value"
        )
    label = str(variables.get("ccbench_label", name))
    if not _LABEL.match(label):
        raise InventoryError(
            f"{where}: ccbench_label {label!r}: use letters, digits, '.', '_', '-' or '+', "
            "at most 64, starting with a letter or digit (it names a directory)"
        )
    connection = str(variables.get("ansible_connection", "ssh"))
    address = variables.get("ansible_host") or variables.get("ansible_ssh_host")
    if connection == "local":
        address = address or "localhost"
    elif not address:
        try:
            ipaddress.ip_address(name)
            address = name
        except ValueError:
            if not _resolves(name):
                raise InventoryError(
                    f"{where} has no address: set ansible_host=<IP or DNS name> ({name!r} does not resolve)"
                ) from None
            address = name
    for key in ("ansible_ssh_private_key_file", "ansible_private_key_file"):
        key_file = variables.get(key)
        if key_file and not Path(os.path.expanduser(str(key_file))).is_file():
            raise InventoryError(f"{where}: {key}={key_file} does not exist; point it at the private key")
    port_key = "ansible_port" if variables.get("ansible_port") is not None else "ansible_ssh_port"
    port = variables.get(port_key)
    try:
        port = int(port) if port is not None else None
    except (TypeError, ValueError):
        raise InventoryError(f"{where}: {port_key}={port!r} is not a number") from None
    workdir = variables.get("ccbench_workdir")
    return FleetHost(
        name=name,
        label=label,
        address=str(address),
        baseline=_as_bool(variables.get("ccbench_baseline", False), where),
        user=variables.get("ansible_user") or variables.get("ansible_ssh_user"),
        port=port,
        connection=connection,
        workdir=str(workdir) if workdir else None,
        components=_components(variables.get("ccbench_components"), where),
        peer=str(variables["ccbench_peer"]).strip() or None if variables.get("ccbench_peer") else None,
    )
