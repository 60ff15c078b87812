"""Ansible stdout callback for ``ccbench fleet``: one JSON object per line per event.

The controller reads these lines as they come (the progress line per host, the outcome of each
phase). Results are never dumped whole: only the fields listed in ``_KEPT`` pass, so that no
variable, connection setting or secret from the inventory reaches the controller's log.
"""

from __future__ import annotations

import json
import sys
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: ccbench_events
    type: stdout
    short_description: JSON lines for the ccbench fleet controller
    description: One JSON object per task event (start, ok, failed, unreachable, skipped, retry).
"""

#: result fields passed on (stdout only for ccbench's own tasks, whose stdout is one JSON line)
_KEPT = ("rc", "msg", "attempts", "retries", "changed", "skipped", "skip_reason", "unreachable")
_TAIL = 600


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "ccbench_events"

    def _emit(self, event: str, **fields) -> None:
        fields = {"event": event, "time": time.time(), **fields}
        sys.stdout.write(json.dumps(fields, default=str) + "\n")
        sys.stdout.flush()

    def _result(self, event: str, result) -> None:
        data = result._result
        task = result._task.get_name()
        kept = {k: data[k] for k in _KEPT if k in data}
        if isinstance(kept.get("msg"), str):
            kept["msg"] = kept["msg"][-_TAIL:]
        if task.startswith("ccbench:"):
            for key in ("stdout", "stderr"):
                if isinstance(data.get(key), str):
                    kept[key] = data[key][-4000:] if key == "stdout" else data[key][-_TAIL:]
        self._emit(event, host=result._host.get_name(), task=task, result=kept)

    def v2_playbook_on_start(self, playbook):
        self._emit("playbook_start")

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._emit("task_start", task=task.get_name())

    def v2_runner_on_start(self, host, task):
        self._emit("host_task_start", host=host.get_name(), task=task.get_name())

    def v2_runner_on_ok(self, result):
        self._result("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result("ignored" if ignore_errors else "failed", result)

    def v2_runner_on_unreachable(self, result):
        self._result("unreachable", result)

    def v2_runner_on_skipped(self, result):
        self._result("skipped", result)

    def v2_runner_retry(self, result):
        self._result("retry", result)

    def v2_playbook_on_stats(self, stats):
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._emit("stats", hosts=summary)

    # everything else Ansible would print (warnings go to stderr) stays quiet
    def v2_playbook_on_play_start(self, play):
        self._emit("play_start", name=play.get_name())

    def v2_playbook_on_no_hosts_matched(self):
        self._emit("no_hosts")
