"""The teardown's signal rules, with a FAKE provider (an in-memory cloud behind the same interface as
the AWS, GCP and Azure adapters; no SDK, no network): a stop signal during the deletions does not stop
them; a second one while waiting for them stops only the waiting, and what could not go yet is left
for the sweep, said so, and kept in the journal."""

from __future__ import annotations

import os
import signal
import time

import pytest
from cloud_studies import study_text, write

from ccbench.machines.cloud.access import Access
from ccbench.machines.cloud.journal import read
from ccbench.machines.cloud.lifecycle import run_arms
from ccbench.machines.cloud.model import load_cloud_study
from ccbench.machines.cloud.provider import Found, Launched, Provider


class FakeCloud(Provider):
    """A fake: resources in a dict. settle() waits until told, like a slow cloud."""

    name = "fake"

    def __init__(self, interrupt_in: str = "") -> None:
        self.resources: dict[str, Found] = {}
        self.interrupt_in = interrupt_in
        self.deleted: list[str] = []

    def request(self, arm, replica, ctx):
        return {"arm": arm.name}

    def preflight(self, study):
        return []

    def prepare(self, ctx, journal):
        journal.intend("network", "net")
        self.resources["net"] = Found("network", "net", ctx.run_id, ctx.expiry)

    def launch(self, arm, replica, ctx, journal):
        name = f"{arm.name}-{replica}"
        journal.intend("instance", name)
        self.resources[name] = Found("instance", name, ctx.run_id, ctx.expiry)
        return Launched(arm.name, replica, name)

    def tagged(self):
        return list(self.resources.values())

    def destroy(self, found):
        lines = []
        for f in found:
            if self.interrupt_in == "destroy" and f.kind == "instance" and not self.deleted:
                os.kill(os.getpid(), signal.SIGINT)  # arrives in the middle of the deletions
            self.resources.pop(f.id)
            self.deleted.append(f.id)
            lines.append(f"fake: deleted {f.id}")
        return lines

    def settle(self, found):
        if self.interrupt_in == "settle":
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)


def _run(tmp_path, fake):
    study = load_cloud_study(write(tmp_path, study_text("aws", "sev-snp")))
    said: list[str] = []

    def body(launched):
        os.kill(os.getpid(), signal.SIGINT)  # the user's first Ctrl-C, during the run
        time.sleep(5)

    with pytest.raises(KeyboardInterrupt):
        run_arms(study, fake, body, said.append, tmp_path / "state", Access(tmp_path / "access"), "192.0.2.1/32")
    (journal,) = (tmp_path / "state").glob("*.jsonl")
    return said, read(journal)


def test_a_second_ctrl_c_while_waiting_stops_the_waiting_not_the_deleting(tmp_path):
    fake = FakeCloud(interrupt_in="settle")
    said, journal = _run(tmp_path, fake)
    assert sorted(fake.deleted) == ["cc-1", "plain-1"]  # every instance's deletion was sent
    assert list(fake.resources) == ["net"]  # what waits for the instances is left ...
    assert any("left for `ccbench cloud sweep`" in line for line in said)  # ... and said so
    assert journal[-2] == {**journal[-2], "op": "left", "ids": ["net"]}
    assert journal[-1]["outcome"] == "failed"


def test_a_ctrl_c_during_the_deletions_does_not_stop_them(tmp_path):
    fake = FakeCloud(interrupt_in="destroy")
    said, journal = _run(tmp_path, fake)
    assert sorted(fake.deleted) == ["cc-1", "plain-1"]
    assert any("every deletion is sent; not waiting" in line for line in said)


def test_without_a_second_signal_everything_goes(tmp_path):
    fake = FakeCloud()
    said, journal = _run(tmp_path, fake)
    assert fake.resources == {} and sorted(fake.deleted) == ["cc-1", "net", "plain-1"]
    access = tmp_path / "access"
    assert not (access / "id_ed25519").exists() and not list(access.glob("hosts/*_ed25519"))  # secrets gone
    assert len(list(access.glob("hosts/*.pub"))) == 2 and (access / "known_hosts").exists()  # the record stays
    assert journal[-1]["outcome"] == "torn down"
