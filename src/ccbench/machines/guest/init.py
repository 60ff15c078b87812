#!/usr/bin/python3
"""PID 1 of ccbench's guest image (installed as /usr/local/sbin/ccbench-guest-init, booted with
``init=``): mounts what a run needs, takes the study's files from QEMU's fw_cfg (the SSH client key,
this arm's SSH host key, its machine id and hostname, the launch record), brings up the user-mode
network, starts OpenSSH's server and then only reaps orphans. It prints ``ccbench-guest: ready`` on
the console when sshd listens. Standard library only: it runs on the guest's Python, not ccbench's."""

import os
import subprocess
import sys
import time

FW_CFG = "/sys/firmware/qemu_fw_cfg/by_name/opt/ccbench"
#: slirp's (QEMU user-mode networking) fixed addresses
ADDRESS, GATEWAY = "10.0.2.15/24", "10.0.2.2"


def say(text):
    print(f"ccbench-guest: {text}", flush=True)


def run(*argv):
    done = subprocess.run(list(argv), capture_output=True, text=True)
    if done.returncode != 0:
        say(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[:200]}")
    return done.returncode == 0


def mount_all():
    for fstype, target in (
        ("proc", "/proc"),
        ("sysfs", "/sys"),
        ("devtmpfs", "/dev"),
        ("tmpfs", "/run"),
        ("tmpfs", "/tmp"),
    ):
        os.makedirs(target, exist_ok=True)
        if not os.path.ismount(target):
            run("mount", "-t", fstype, fstype, target)
    for fstype, target in (("devpts", "/dev/pts"), ("tmpfs", "/dev/shm")):
        os.makedirs(target, exist_ok=True)
        if not os.path.ismount(target):
            run("mount", "-t", fstype, fstype, target)
    run("mount", "-o", "remount,rw", "/")


def fw_cfg(name):
    path = os.path.join(FW_CFG, name, "raw")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return handle.read()


def place(name, target, mode):
    data = fw_cfg(name)
    if data is None:
        return False
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as handle:
        handle.write(data)
    os.chmod(target, mode)
    return True


def configure():
    run("modprobe", "qemu_fw_cfg")
    place("authorized_keys", "/root/.ssh/authorized_keys", 0o600)
    os.chmod("/root/.ssh", 0o700)
    place("launch", "/run/ccbench/launch.json", 0o644)
    place("machine_id", "/etc/machine-id", 0o444)
    hostname = (fw_cfg("hostname") or b"ccbench-guest").decode().strip()
    run("hostname", hostname)
    with open("/etc/hostname", "w") as handle:
        handle.write(hostname + "\n")
    with open("/etc/hosts", "w") as handle:
        handle.write(f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")
    if not place("ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key", 0o600):
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", "/etc/ssh/ssh_host_ed25519_key")


def network():
    run("modprobe", "virtio_net")
    run("ip", "link", "set", "lo", "up")
    nics = []
    for _ in range(300):
        nics = sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
        if nics:
            break
        time.sleep(0.1)
    if not nics:
        say("no network interface")
        return
    run("ip", "link", "set", nics[0], "up")
    run("ip", "addr", "add", ADDRESS, "dev", nics[0])
    run("ip", "route", "add", "default", "via", GATEWAY)


def main():
    os.environ.update(PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME="/root", LANG="C.UTF-8")
    mount_all()
    configure()
    network()
    os.makedirs("/run/sshd", exist_ok=True)
    if run("/usr/sbin/sshd", "-o", "HostKey=/etc/ssh/ssh_host_ed25519_key", "-o", "PasswordAuthentication=no"):
        say("ready")
    else:
        say("sshd did not start")
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(1)
        except Exception as error:  # PID 1 must never exit: the kernel would panic
            print(f"ccbench-guest: {error}", file=sys.stderr, flush=True)
            time.sleep(1)


if __name__ == "__main__":
    main()
