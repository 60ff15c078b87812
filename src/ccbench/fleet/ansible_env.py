"""How the controller runs ``ansible-playbook``: the shipped playbook and the environment it runs
with (the ``ccbench_events`` callback, host key checking, the SSH options of a fleet)."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PLAYBOOK = PACKAGE_DIR / "playbook.yml"

#: SSH client options for the fleet: connections shared within a run (ControlPersist), no -C
#: (compression costs more CPU than it saves on the links fleets use, and bundles are fetched
#: as one tar), AES-GCM first where both sides have it (the CPU's AES instructions: about 1.5x
#: chacha20's throughput on a fetch here), the rest of OpenSSH's default list after it
SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s -o Ciphers=^aes128-gcm@openssh.com,aes256-gcm@openssh.com"


def ansible_environment(*, mode: str, accept_new_host_keys: bool, control_dir: Path) -> dict[str, str]:
    """The environment ansible-playbook runs with (the user's ANSIBLE_SSH_ARGS, ANSIBLE_TIMEOUT,
    ANSIBLE_SSH_TRANSFER_METHOD and interpreter choice win where set)."""
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_STDOUT_CALLBACK": "ccbench_events",
            "ANSIBLE_CALLBACK_PLUGINS": str(PACKAGE_DIR / "callback_plugins"),
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "False",
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_INTERPRETER_PYTHON": env.get("ANSIBLE_INTERPRETER_PYTHON", "auto_silent"),
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
            "ANSIBLE_SYSTEM_WARNINGS": "False",
            "ANSIBLE_STRATEGY": "free" if mode != "serial" else "linear",
            "ANSIBLE_SSH_ARGS": env.get("ANSIBLE_SSH_ARGS", SSH_ARGS),
            "ANSIBLE_TIMEOUT": env.get("ANSIBLE_TIMEOUT", "20"),
            # SSH connections are shared within one fleet run only: a master left by another run
            # would skip host key checking and outlive a stopped sshd
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        }
    )
    env.pop("ANSIBLE_LOG_PATH", None)  # a log of module arguments is not wanted next to secrets
    if accept_new_host_keys:
        env["ANSIBLE_SSH_EXTRA_ARGS"] = "-o StrictHostKeyChecking=accept-new"
    return env
