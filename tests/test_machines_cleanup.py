"""`ccbench cleanup --workdir DIR` after a killed study (issue 59, item 7): it stops the guests and ends
the SSH connections that DIR's studies left, and nothing of another work directory's or of a live run.

The guests here are stand-ins (no QEMU needed): real processes whose command line names their run
directory, entered in a guest index of the test's own as a study enters its guests, with no owner
holding the entry's lock (a controller killed outright). The SSH control directories are made by
the fleet's own code in processes that then exit (killed fleet runs) or by this one (a live run).
test_machines_lifecycle.py does the same with real guests."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ccbench.fleet.sshcontrol import close_control_dir, make_control_dir
from ccbench.machines.guest import socket_dir


def _stand_in_guest(index: Path, run_dir: Path, workdir: Path, rid: str) -> subprocess.Popen:
    run_dir.mkdir(parents=True)
    (run_dir / "overlay.qcow2").write_bytes(b"overlay")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", str(run_dir / "qemu")])
    socket_dir(rid).mkdir(mode=0o700)
    index.mkdir(parents=True, exist_ok=True)
    record = {"name": rid, "run_dir": str(run_dir), "ssh_port": 0, "pid": process.pid, "owner_pid": 1}
    (index / f"{rid}.json").write_text(json.dumps({**record, "workdir": str(workdir.resolve())}))
    return process


def _control_dir_of_a_killed_fleet_run(workdir: Path) -> Path:
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from ccbench.fleet.sshcontrol import make_control_dir; print(make_control_dir({str(workdir)!r}))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return Path(made.stdout.strip())


def test_cleanup_of_a_work_directory_touches_only_what_its_studies_left(tmp_path, ccbench):
    index = tmp_path / "index"
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir(), other.mkdir()
    rid = f"t{os.getpid():x}"
    guest_mine = _stand_in_guest(index, tmp_path / "study-a" / "arms" / "plain", mine, rid + "a")
    guest_other = _stand_in_guest(index, tmp_path / "study-b" / "arms" / "plain", other, rid + "b")
    ssh_mine, ssh_other = _control_dir_of_a_killed_fleet_run(mine), _control_dir_of_a_killed_fleet_run(other)
    ssh_live = make_control_dir(mine)  # a fleet run of this work directory that lives: this process
    try:
        done = ccbench("cleanup", "--workdir", mine, env={"CCBENCH_GUEST_INDEX": str(index)})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert f"stopped guest {rid}a (QEMU pid {guest_mine.pid}) left by a run that died" in lines, lines
        assert f"removed {ssh_mine} (the SSH connections of a fleet run that died)" in lines, lines
        assert lines[-1] == f"clean: 2 item(s) removed for the work directory {mine}", lines
        assert guest_mine.wait(timeout=30) != 0
        assert not (tmp_path / "study-a" / "arms" / "plain" / "overlay.qcow2").exists()
        assert not (index / f"{rid}a.json").exists() and not socket_dir(rid + "a").exists()
        assert not ssh_mine.exists()
        # another work directory's guest and connections, and a live run's, are left alone
        time.sleep(0.2)
        assert guest_other.poll() is None and (index / f"{rid}b.json").exists()
        assert (tmp_path / "study-b" / "arms" / "plain" / "overlay.qcow2").exists()
        assert ssh_other.exists() and ssh_live.exists()
    finally:
        for process in (guest_mine, guest_other):
            process.kill()
            process.wait()
        for directory in (ssh_mine, ssh_other, ssh_live):
            if directory.exists():
                close_control_dir(directory)
        for suffix in "ab":
            if socket_dir(rid + suffix).exists():
                socket_dir(rid + suffix).rmdir()
