"""command: any shell command, timed as a whole (wall, user and system CPU, peak RSS)."""

from __future__ import annotations

import shutil

from pydantic import Field

from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, RepeatingFailure, Workload, WorkloadFailed, WorkloadParams

#: bash's exit codes for a command it could not find (127) or not execute (126): the same next time
NOT_RUNNABLE = (126, 127)


class CommandParams(WorkloadParams):
    #: run by ``bash -c`` in the workload's directory (the storage variant's directory)
    command: str = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)


class Command(Workload):
    kind = "command"
    description = "any shell command timed as a whole: wall, user and system CPU, peak RSS"
    Params = CommandParams
    variant_axes = frozenset({"storage"})
    #: the command's wall time (``wall_s``: hyperfine's, as imported); user/system time and RSS explain it
    primary_metrics = ("wall_time", "wall_s")

    def requirements(self) -> str | None:
        return None if shutil.which("bash") else "bash is not installed (apt-get install bash)"

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        result = ctx.run_command(
            ["bash", "-c", self.params.command], env=self.params.env, log_name="command", check=False
        )
        if result.returncode in NOT_RUNNABLE:
            raise RepeatingFailure(result.failure())
        if result.returncode:
            raise WorkloadFailed(result.failure())
        return [
            Measurement(metric="wall_time", unit="s", value=result.wall_s),
            Measurement(metric="user_time", unit="s", value=result.user_s),
            Measurement(metric="system_time", unit="s", value=result.sys_s),
            Measurement(metric="peak_rss", unit="MiB", value=result.max_rss_kib / 1024),
        ]
