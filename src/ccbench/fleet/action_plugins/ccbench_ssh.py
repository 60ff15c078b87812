"""What ccbench's two action plugins share (``ccbench_fetch`` and ``ccbench_push``, each loading this
file by its path: Ansible loads each action plugin from its own file, not as a member of a package,
and no plugin may import ccbench, as the interpreter running ansible-playbook need not have it): no
file transfer of Ansible's own, a connection, their required arguments, and the ssh command line of
the task's own connection. Not an action itself: it defines no ActionModule."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class CcbenchAction(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True
    #: the action's name, in its messages
    NAME = ""

    def _required(self, *names: str) -> list:
        """The task's arguments ``names``, each given, else the one-line failure naming them all."""
        values = [self._task.args.get(name) for name in names]
        if not all(values):
            raise AnsibleActionFail(f"{self.NAME} needs {', '.join(names[:-1])} and {names[-1]}")
        return values

    def _ssh_command(self, remote: str) -> list[bytes] | None:
        return ssh_command(self._connection, self._play_context, remote)


def ssh_command(connection, play_context, remote: str) -> list[bytes] | None:
    """The ssh command line the connection plugin would run for ``remote`` (the inventory's user,
    port, key, ssh arguments and the play's control path), or None where it cannot: a connection
    other than ssh, or a password (typed by sshpass or askpass in the plugin's own run)."""
    # every Ansible connection names its kind in .transport (an abstract property of ConnectionBase)
    if connection.transport != "ssh" or not hasattr(connection, "_build_command"):
        return None
    try:
        if connection.get_option("password") or play_context.password:
            return None
    except KeyError:
        pass
    connection.host = connection.get_option("host") or play_context.remote_addr
    return connection._build_command(connection.get_option("ssh_executable"), "ssh", connection.host, remote)
