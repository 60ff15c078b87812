"""Ansible action ``ccbench_fetch``: bring one host's bundle to the controller, unpacked and checked.

Streaming (the usual case: the ssh connection, key or agent authentication, the bundle readable by
the login user): the host's ``send`` command (``tar -c -f - ...`` of the bundle, given by the
agent's ``pack --stream``) runs through the task's own ssh connection, built by the connection
plugin itself (``_build_command``: the inventory's user, port, key, ssh arguments and control
path, so the stream shares the play's SSH connection), and its standard output goes straight into
``python -m ccbench.fleet.receive`` on the controller, which checks every member before
writing it, hashes each file as it arrives, compares the result with the host's listing and the
bundle's attestation.json, and renames the staged bundle into place only when all of that passed
(``ccbench.fleet.receive.receive_bundle``). No archive is written on either side and nothing on
the host is removed: the host's bundle stays, so a failed or interrupted gathering loses nothing.

Otherwise (under become the archive is packed for the login user; a connection other than ssh, or
a password to type): one archive file moves with the connection's ``fetch_file`` (sftp or scp for
ssh), as ``ansible.builtin.fetch`` would without its three hashings of the file; it is unpacked
through the same checks and removed on both sides. Under become the host's ``pack`` made the
archive (handed to the login user); without become the host's ``send`` writes it first.

Arguments: ``src`` (the remote bundle directory when streaming, else the remote archive), ``send``
(the command writing the tar stream), ``target`` (the local directory the bundle goes into),
``dest`` (a local file: the receiver's result, one JSON object, is written there for the
controller), ``files`` and ``file_bytes`` (the host's listing), ``bytes`` (an archive's size),
``remove`` (the remote archive or its directory, removed afterwards), ``python`` (the controller's
Python with ccbench; this interpreter when not given). Runs as the login user: the task has
``become: false``.

The result's ``stdout`` is one JSON line (the fleet's event callback passes it to the controller):
the bundle, the checks, bytes received, seconds, the way it travelled.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from ansible.errors import AnsibleActionFail

# the connection's ssh command line: ccbench_ssh.py, beside this file and loaded by its path
_spec = importlib.util.spec_from_file_location("ccbench_ssh", os.path.join(os.path.dirname(__file__), "ccbench_ssh.py"))
_ssh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ssh)

#: what ``pack`` creates: nothing else is ever removed by this action
_REMOVABLE = ("bundle.tar", "ccbench-fetch-")
#: the pipe from ssh to the receiver (Linux: F_SETPIPE_SZ): 1 MiB rather than 64 KiB
_PIPE_BYTES = 1 << 20


class ActionModule(_ssh.CcbenchAction):
    NAME = "ccbench_fetch"

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        source, target, dest = self._required("src", "target", "dest")
        if self._connection.become:
            raise AnsibleActionFail("ccbench_fetch runs as the login user: give its task 'become: false'")
        receiver = [
            args.get("python") or sys.executable,
            "-m",
            "ccbench.fleet.receive",
            "--target",
            str(target),
            "--where",
            f"the bundle {source} from {(task_vars or {}).get('inventory_hostname') or self._play_context.remote_addr}",
        ]
        if args.get("files") not in (None, "", "None"):
            receiver += ["--files", str(int(args["files"])), "--file-bytes", str(int(args["file_bytes"]))]
        send = args.get("send") or []
        ssh = self._ssh_command(shlex.join(send)) if send else None
        started = time.monotonic()
        if ssh is not None:
            document, how = self._stream(ssh, receiver), "stream: one ssh channel into the checked unpack"
        else:
            document, how = self._fetch_archive(args, source, send, receiver), "archive: the connection's fetch_file"
        seconds = time.monotonic() - started
        document.update(seconds=round(seconds, 3), way=how)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest + ".partial", "w") as handle:
            json.dump(document, handle)
        os.replace(dest + ".partial", dest)
        result.update(changed=True, stdout=json.dumps(document))
        return result

    def _stream(self, ssh: list[bytes], receiver: list[str]) -> dict:
        """ssh's standard output piped into the receiver; its result, or the failure of either."""
        read_end, write_end = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
        except OSError:
            pass  # the default pipe size: slower, not wrong
        with tempfile.TemporaryFile() as ssh_errors:
            try:
                sender = subprocess.Popen(ssh, stdin=subprocess.DEVNULL, stdout=write_end, stderr=ssh_errors)
            except OSError as exc:
                os.close(read_end)
                os.close(write_end)
                raise AnsibleActionFail(f"cannot start ssh: {exc}") from None
            os.close(write_end)
            try:
                unpacking = subprocess.Popen(receiver, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except OSError as exc:
                sender.kill()
                sender.wait()
                raise AnsibleActionFail(f"cannot start the receiver {receiver[0]}: {exc}") from None
            finally:
                os.close(read_end)
            try:
                out, err = unpacking.communicate()
                sent = sender.wait()
            finally:
                for process in (unpacking, sender):
                    if process.poll() is None:
                        process.kill()
                        process.wait()
            ssh_errors.seek(0)
            ssh_err = ssh_errors.read().decode(errors="replace").strip()
        if unpacking.returncode != 0:
            why = err.decode(errors="replace").strip() or f"the receiver exited {unpacking.returncode}"
            if sent != 0:
                why += f" (ssh exited {sent}: {ssh_err[-300:]})"
            raise AnsibleActionFail(why)
        document = json.loads(out)
        if sent != 0:
            # the stream was complete and every check passed: what the sender said is kept
            document["sender_exit"] = sent
            document["sender_stderr"] = ssh_err[-300:]
        return document

    def _fetch_archive(self, args: dict, source: str, send: list[str], receiver: list[str]) -> dict:
        """One archive file through fetch_file, then the same receiver over it; removed on both sides."""
        remote, remove = source, args.get("remove")
        if send:
            # no archive yet (no become): the host's send command writes one beside the run's out/
            remote = remove = os.path.join(os.path.dirname(os.path.dirname(source.rstrip("/"))), "bundle.tar")
            done = self._low_level_execute_command(
                f"{shlex.join(send)} > {shlex.quote(remote)}.partial && mv -f -- {shlex.quote(remote)}.partial {shlex.quote(remote)}",
                sudoable=False,
            )
            if done.get("rc") != 0:
                raise AnsibleActionFail(f"packing {source} on the host failed: {done.get('stderr', '')[-300:]}")
        local = tempfile.NamedTemporaryFile(prefix="ccbench-fetch-", suffix=".tar", delete=False)
        local.close()
        try:
            self._connection.fetch_file(remote, local.name)
            expected = args.get("bytes")
            received = os.path.getsize(local.name)
            if expected not in (None, "", "None") and received != int(expected):
                raise AnsibleActionFail(
                    f"the bundle archive arrived incomplete: {received} of {int(expected)} bytes from {remote}"
                )
            with open(local.name, "rb") as archive:
                done = subprocess.run(receiver, stdin=archive, capture_output=True)
            if done.returncode != 0:
                raise AnsibleActionFail(
                    done.stderr.decode(errors="replace").strip() or f"the receiver exited {done.returncode}"
                )
            return json.loads(done.stdout)
        finally:
            os.unlink(local.name)
            if remove and os.path.basename(remove.rstrip("/")).startswith(_REMOVABLE):
                try:
                    self._low_level_execute_command(f"rm -rf -- {shlex.quote(remove)}", sudoable=False)
                except Exception:  # noqa: BLE001 - a lost connection must not hide why the fetch failed
                    pass
