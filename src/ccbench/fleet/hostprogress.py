"""One progress line per host of a fleet run: phase, execution i/n, elapsed (the controller,
ccbench.fleet.engine, updates it from the playbook's events)."""

from __future__ import annotations

import time

from ccbench.fleet.records import FleetRun, HostRun


class Progress:
    """One line per host: phase, execution i/n, elapsed. Live on a terminal, a line per change
    otherwise (logs, CI)."""

    def __init__(self, fleet: FleetRun, stream=None):
        from ccbench.basics.console import console

        self.fleet = fleet
        self.console = console
        self.live = None
        self.last: dict[str, str] = {}
        if console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)
            self.live.start()

    def line(self, label: str, current: HostRun) -> str:
        elapsed = time.time() - self.fleet.command_started
        counter = (
            f" {current.executions_done}/{current.executions_total}"
            if current.phase == "run" and current.executions_total
            else ""
        )
        state = current.phase if current.outcome == "pending" else current.outcome
        rounds = f" [{current.round}]" if len(self.fleet.rounds) > 1 else ""
        reason = f": {current.reason}" if current.reason and current.outcome != "ok" else ""
        return f"{label}{rounds}: {state}{counter} {elapsed:.0f} s{reason}"

    def _render(self):
        from rich.text import Text

        lines = []
        for label, rounds in self.fleet.runs.items():
            current = self._current(rounds)
            lines.append(self.line(label, current))
        return Text("\n".join(lines))

    @staticmethod
    def _current(rounds: dict[str, HostRun]) -> HostRun:
        active = [r for r in rounds.values() if r.phase != "pending" or r.outcome != "pending"]
        return active[-1] if active else next(iter(rounds.values()))

    def update(self, label: str) -> None:
        if self.live is not None:
            self.live.update(self._render())
            return
        current = self._current(self.fleet.runs[label])
        text = self.line(label, current)
        # without a terminal: a line when what it says changes (the elapsed time aside)
        signature = f"{current.round}|{current.phase if current.outcome == 'pending' else current.outcome}|{current.executions_done}"
        if self.last.get(label) != signature:
            self.last[label] = signature
            self.console.print(text, markup=False, highlight=False)

    def stop(self) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.stop()
            self.live = None
