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

import importlib.util
import json
import os
import posixpath
import shlex
import subprocess
import tempfile
import time

from ansible.errors import AnsibleActionFail

# ssh_command, from ccbench_ssh.py beside this file (loaded by its path: see there)
_spec = importlib.util.spec_from_file_location("ccbench_ssh", os.path.join(os.path.dirname(__file__), "ccbench_ssh.py"))
_ssh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ssh)


class ActionModule(_ssh.CcbenchAction):
    NAME = "ccbench_push"

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        source, dest, then = self._required("src", "dest", "then")
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
