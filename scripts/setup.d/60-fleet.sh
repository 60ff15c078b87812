#!/usr/bin/env bash
# fleet: ansible-core 2.19 (drives the hosts), kubernetes-validate (offline manifest check), OpenSSH (the test hosts)
# ansible-core 2.19.x is the newest line that supports Python 3.11; pinned so every controller
# drives hosts the same way. iproute2 and util-linux make the emulated test hosts (network and
# mount namespaces); python3-venv is what a Debian host needs to take the fleet's wheelhouse.
pip_install "ansible-core==2.19.14" "kubernetes-validate==1.37.0" "packaging>=23"
if ! dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q "install ok installed"; then
  fleet_sudo=""
  [ "$(id -u)" -eq 0 ] || fleet_sudo=sudo
  # the package's own sshd is not wanted (the tests start their own, one per emulated host):
  # keep the maintainer scripts from starting it (policy-rc.d), and leave it disabled
  fleet_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $fleet_sudo tee /usr/sbin/policy-rc.d >/dev/null
    $fleet_sudo chmod 755 /usr/sbin/policy-rc.d
    fleet_policy=1
  fi
  apt_install openssh-server || { [ "$fleet_policy" -eq 0 ] || $fleet_sudo rm -f /usr/sbin/policy-rc.d; die "installing openssh-server failed"; }
  [ "$fleet_policy" -eq 0 ] || $fleet_sudo rm -f /usr/sbin/policy-rc.d
  if [ -d /run/systemd/system ]; then
    $fleet_sudo systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true
  fi
fi
apt_install openssh-client iproute2 util-linux python3 python3-venv
