"""Run by tests/test_cloud_lifecycle.py as its own process: launch a cloud study's arms through the
real AWS adapter (against the moto server the test started) and stop after the first instance, the
way a run is caught mid-launch. Not a fake: only the pause is added."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ccbench.machines.cloud.access import Access
from ccbench.machines.cloud.aws import Aws
from ccbench.machines.cloud.lifecycle import run_arms
from ccbench.machines.cloud.model import load_cloud_study


class PausingAws(Aws):
    def __init__(self, cloud, marker: Path) -> None:
        super().__init__(cloud)
        self.marker = marker

    def launch(self, arm, replica, ctx, journal):
        launched = super().launch(arm, replica, ctx, journal)
        self.marker.write_text(launched.id)
        time.sleep(120)  # mid-launch: the test kills or interrupts us here
        return launched


def main() -> None:
    study_path, state, marker, access = sys.argv[1:5]
    study = load_cloud_study(study_path)
    provider = PausingAws(study.cloud, Path(marker))
    run_arms(study, provider, lambda launched: None, print, Path(state), Access(Path(access)), "192.0.2.1/32")


if __name__ == "__main__":
    main()
