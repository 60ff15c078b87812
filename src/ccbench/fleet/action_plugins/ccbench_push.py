"""Ansible action ``ccbench_push``: the wheelhouse tar streamed into ``tar -x`` on the host, then a
command, over the play's ssh connection: one task and no remote module for what the copy module
did in three steps (a checksum of the tar on each side, a temporary file, the unpacking after it).

Arguments: ``src`` (the local tar), ``dest`` (the remote directory it is unpacked into: emptied
first, created with mode 0700 under its parent; the files become the login user's, whatever
owner the controller's tar recorded), ``then`` (a shell command run on the host after
the unpacking succeeded, in the directory above ``dest``'s parent: the install).

Only for the ssh connection without a password and without become (the command runs as the login
user, which owns the host's ccbench directory then). Anywhere else the task returns
``{"streamed": false}`` and changes nothing: the playbook's copy and shell tasks do the same steps
(``ccbench:install copy``, ``ccbench:install files``).

The result's ``stdout`` is one JSON line: streamed, bytes, seconds.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import subprocess
import tempfile
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        source, dest, then = args.get("src"), args.get("dest"), args.get("then")
        if not source or not dest or not then:
            raise AnsibleActionFail("ccbench_push needs src, dest and then")
        dest = dest.rstrip("/")
        parent = posixpath.dirname(dest)
        remote = (
            f"mkdir -p -m 700 {shlex.quote(parent)} && rm -rf -- {shlex.quote(dest)} && mkdir -m 700 {shlex.quote(dest)}"
            f" && tar --no-same-owner -xf - -C {shlex.quote(dest)} && cd {shlex.quote(posixpath.dirname(parent))} && {then}"
        )
        # through /bin/sh whatever the login shell is, as Ansible runs its own commands
        ssh = None if self._play_context.become else self._ssh_command(f"/bin/sh -c {shlex.quote(remote)}")
        if ssh is None:
            result.update(changed=False, stdout=json.dumps({"streamed": False}))
            return result
        started = time.monotonic()
        with open(source, "rb") as archive, tempfile.TemporaryFile() as errors:
            try:
                done = subprocess.run(ssh, stdin=archive, stdout=subprocess.DEVNULL, stderr=errors, timeout=3600)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise AnsibleActionFail(f"streaming {source} to the host failed: {exc}") from None
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip().splitlines()
        if done.returncode != 0:
            # the last line says why (install.py writes one line; tar and ssh end with theirs)
            raise AnsibleActionFail(
                f"unpacking and installing ccbench on the host failed (exit {done.returncode}): "
                f"{said[-1][-400:] if said else 'no message'}"
            )
        document = {"streamed": True, "bytes": os.path.getsize(source), "seconds": round(time.monotonic() - started, 3)}
        result.update(changed=True, stdout=json.dumps(document))
        return result

    def _ssh_command(self, remote: str) -> list[bytes] | None:
        """The ssh command line the connection plugin would run for ``remote``, or None (a
        connection other than ssh, or a password). The same as ccbench_fetch's: Ansible loads each
        action plugin from its own file, and neither may import ccbench (the interpreter running
        ansible-playbook need not have it)."""
        connection = self._connection
        # every Ansible connection names its kind in .transport (an abstract property of ConnectionBase)
        if connection.transport != "ssh" or not hasattr(connection, "_build_command"):
            return None
        try:
            if connection.get_option("password") or self._play_context.password:
                return None
        except KeyError:
            pass
        connection.host = connection.get_option("host") or self._play_context.remote_addr
        return connection._build_command(connection.get_option("ssh_executable"), "ssh", connection.host, remote)
