"""Ansible action ``ccbench_fetch``: bring one packed bundle archive to the controller, then remove it.

It moves the file with the task's own connection plugin (``fetch_file``: for the ssh connection
that is sftp or scp through the shared SSH connection, per ``ANSIBLE_SSH_TRANSFER_METHOD``), the
same transfer ``ansible.builtin.fetch`` uses, without what makes that module slow for one large
file: ``fetch`` hashes the file three times whatever ``validate_checksum`` says (a remote ``stat``
module run computing its SHA-1, then SHA-1 and MD5 of the local copy), which on the development
machine took longer than the transfer itself. The controller checks the archive instead: its size
here (this action), then every member and the bundle's own SHA-256 list after unpacking
(``ccbench.fleet.gather.unpack_bundle``).

Arguments: ``src`` (the remote archive), ``dest`` (the local path; written as ``dest.partial`` and
renamed when complete), ``bytes`` (the size ``pack`` reported), ``remove`` (the remote path to
delete afterwards, on success and on failure: the bundle itself stays on the host and can be packed
again). Under become the login user could not read the archive: the playbook runs this task with
``become: false`` and ``pack`` hands the archive to the login user.

The result's ``stdout`` is one JSON line (the fleet's event callback passes it to the controller):
bytes received, seconds, the transfer method.
"""

from __future__ import annotations

import json
import os
import shlex
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

#: what ``pack`` creates: nothing else is ever removed by this action
_REMOVABLE = ("bundle.tar", "ccbench-fetch-")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        source, dest = args.get("src"), args.get("dest")
        expected = args.get("bytes")
        remove = args.get("remove")
        if not source or not dest:
            raise AnsibleActionFail("ccbench_fetch needs src and dest")
        if self._connection.become:
            raise AnsibleActionFail("ccbench_fetch runs as the login user: give its task 'become: false'")
        partial = dest + ".partial"
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        started = time.monotonic()
        transfer_s = None
        try:
            self._connection.fetch_file(source, partial)
            transfer_s = time.monotonic() - started
            received = os.path.getsize(partial)
            if expected is not None and received != int(expected):
                raise AnsibleActionFail(
                    f"the bundle archive arrived incomplete: {received} of {int(expected)} bytes from {source}"
                )
            os.replace(partial, dest)
        except BaseException:
            if os.path.exists(partial):
                os.unlink(partial)
            raise
        finally:
            seconds = time.monotonic() - started
            if remove and os.path.basename(remove.rstrip("/")).startswith(_REMOVABLE):
                try:
                    self._low_level_execute_command(f"rm -rf -- {shlex.quote(remove)}", sudoable=False)
                except Exception:  # noqa: BLE001 - a lost connection must not hide why the fetch failed
                    pass
        method = None
        try:
            method = self._connection.get_option("ssh_transfer_method")
        except (KeyError, AttributeError):
            pass
        result.update(
            changed=True,
            stdout=json.dumps(
                {
                    "fetched": dest,
                    "bytes": received,
                    "seconds": round(seconds, 3),
                    "transfer_s": round(transfer_s, 3),
                    "transfer_method": method or "smart",
                    "removed": remove,
                }
            ),
        )
        return result
