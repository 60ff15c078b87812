"""Inventories in the shapes real projects ship them (kubespray's directory with group_vars/ and
host_vars/, k3s-ansible's YAML with a cluster token, kolla-ansible's INI with host ranges and a
local deployment host, Ansible's own examples with the old ssh_* spellings), read with the
installed ansible-core. Written here in those shapes; no project's file is copied."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ccbench.fleet.inventory import InventoryError, read_inventory

pytestmark = pytest.mark.skipif(
    shutil.which("ansible-inventory") is None and not (Path(sys.executable).parent / "ansible-inventory").exists(),
    reason="ansible-core is not installed (bash scripts/setup.sh --with fleet)",
)

SECRET = "ccbench-sentinel-t0ken"


def _write(base: Path, relative: str, text: str) -> Path:
    path = base / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def _fleet(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ccbench", "fleet", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def _kubespray_like(base: Path) -> Path:
    directory = base / "mycluster"
    _write(
        directory,
        "inventory.ini",
        """
        [kube_control_plane]
        cp1 ansible_host=10.204.7.11 ip=10.3.0.1 etcd_member_name=etcd1

        [etcd:children]
        kube_control_plane

        [kube_node]
        worker1 ansible_host=10.204.7.21
        worker2 ansible_host=10.204.7.22
        """,
    )
    _write(directory, "group_vars/all/all.yml", f"ansible_user: ubuntu\nkube_token: {SECRET}\n")
    _write(directory, "group_vars/kube_node/ccbench.yml", "ccbench_components: [storage]\n")
    _write(directory, "host_vars/worker2.yml", "ccbench_label: confidential\nccbench_baseline: true\n")
    return directory


def test_an_inventory_directory_is_read_with_its_group_and_host_variables(tmp_path):
    inventory = read_inventory(_kubespray_like(tmp_path))
    assert [(h.name, h.label, h.user, h.components) for h in inventory.hosts] == [
        ("cp1", "cp1", "ubuntu", []),
        ("worker1", "worker1", "ubuntu", ["storage"]),
        ("worker2", "confidential", "ubuntu", ["storage"]),
    ]
    assert inventory.baseline.name == "worker2"
    assert SECRET not in str([h.public() for h in inventory.hosts])


def test_fleet_run_accepts_an_inventory_directory(tmp_path):
    """The command line took only a file: a directory was refused before the inventory was read.
    With a plan that does not exist, getting as far as the plan shows the directory was accepted."""
    done = _fleet("run", "no-such-plan", "--inventory", _kubespray_like(tmp_path), "--out", tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no-such-plan" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_default_baseline_is_the_first_host_in_the_files_order(tmp_path):
    """ansible-inventory --list puts ungrouped hosts first: a jump host listed last in a k3s-style
    YAML inventory was taken for the baseline."""
    path = _write(
        tmp_path,
        "hosts.yml",
        """
        k3s_cluster:
          children:
            server:
              hosts:
                10.204.7.31:
            agent:
              hosts:
                10.204.7.33:
                10.204.7.32:
        all:
          hosts:
            jump: {ansible_host: 10.204.7.30}
        """,
    )
    inventory = read_inventory(path)
    assert [h.name for h in inventory.hosts] == ["10.204.7.31", "10.204.7.33", "10.204.7.32", "jump"]
    assert inventory.baseline.name == "10.204.7.31"


def test_old_ssh_spellings_give_address_user_and_port(tmp_path):
    path = _write(
        tmp_path,
        "hosts",
        """
        [legacy]
        old1 ansible_ssh_host=10.204.7.41 ansible_ssh_user=admin ansible_ssh_port=2222
        old2 ansible_host=10.204.7.42 ansible_ssh_user=admin ansible_port=22 ansible_ssh_pass=x
        """,
    )
    inventory = read_inventory(path)
    assert [(h.address, h.user, h.port) for h in inventory.hosts] == [
        ("10.204.7.41", "admin", 2222),
        ("10.204.7.42", "admin", 22),
    ]


def test_a_host_range_expands_in_order_and_a_range_without_addresses_says_what_to_set(tmp_path):
    _write(tmp_path, "ranged/host_vars/control01.yml", "ansible_host: 10.204.7.51\n")
    _write(tmp_path, "ranged/host_vars/control02.yml", "ansible_host: 10.204.7.52\n")
    _write(tmp_path, "ranged/host_vars/control03.yml", "ansible_host: 10.204.7.53\n")
    path = _write(
        tmp_path,
        "ranged/multinode",
        """
        [control]
        control[01:03] ansible_user=kolla ansible_become=true

        [deployment]
        localhost ansible_connection=local ccbench_label=deploy
        """,
    )
    inventory = read_inventory(path.parent)
    assert [(h.name, h.address) for h in inventory.hosts] == [
        ("control01", "10.204.7.51"),
        ("control02", "10.204.7.52"),
        ("control03", "10.204.7.53"),
        ("localhost", "localhost"),
    ]
    assert inventory.by_name("localhost").connection == "local"
    bare = _write(tmp_path, "bare.ini", "[nodes]\nccbench-nowhere-[1:3].invalid\n")
    with pytest.raises(InventoryError) as caught:
        read_inventory(bare)
    message = str(caught.value)
    assert "ccbench-nowhere-1.invalid" in message and "set ansible_host" in message and "\n" not in message


def test_templated_connection_variables_are_resolved_as_a_playbook_would(tmp_path):
    path = _write(
        tmp_path,
        "hosts.yml",
        """
        k3s_cluster:
          children:
            server:
              hosts:
                srv: {node_ip: 10.204.7.61}
            agent:
              hosts:
                agt: {node_ip: 10.204.7.62, ccbench_label: "{{ inventory_hostname }}-cvm"}
          vars:
            ansible_host: "{{ node_ip }}"
            ansible_port: "{{ ssh_port }}"
            ansible_user: "{{ 'debian' | upper }}"
            ssh_port: 2200
            token: "@SECRET@"
            api_endpoint: "{{ hostvars[groups['server'][0]]['ansible_host'] }}"
        """.replace("@SECRET@", SECRET),
    )
    inventory = read_inventory(path)
    assert [(h.name, h.label, h.address, h.port, h.user) for h in inventory.hosts] == [
        ("srv", "srv", "10.204.7.61", 2200, "DEBIAN"),
        ("agt", "agt-cvm", "10.204.7.62", 2200, "DEBIAN"),
    ]
    assert SECRET not in str([h.public() for h in inventory.hosts])


def test_a_template_ansible_cannot_resolve_is_a_one_line_reason(tmp_path):
    """Read as written, such a host got the template text itself as its address."""
    path = _write(tmp_path, "hosts.ini", "[nodes]\nn1 ansible_host='{{ no_such_var }}'\n")
    with pytest.raises(InventoryError) as caught:
        read_inventory(path)
    message = str(caught.value)
    assert "host n1" in message and "ansible_host" in message and "no_such_var" in message, message
    assert "cannot resolve" in message and "\n" not in message


def test_a_secret_on_a_line_ansible_refuses_is_not_quoted_in_the_error(tmp_path):
    """Ansible's INI parser quotes the assignment it refuses; ccbench passed that on, token and all."""
    path = _write(tmp_path, "hosts.ini", f"[servers]\nnode1 ansible_host=10.204.7.81 k3s_token:{SECRET}\n")
    with pytest.raises(InventoryError) as caught:
        read_inventory(path)
    assert "k3s_token" in str(caught.value) and SECRET not in str(caught.value)
    done = _fleet("run", "quick", "--inventory", path, "--out", tmp_path / "out")
    assert done.returncode == 2 and "k3s_token" in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert not (tmp_path / "out").exists()
