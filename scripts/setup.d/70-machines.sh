#!/usr/bin/env bash
# machines: what `ccbench machines` needs to launch a study's arms on this host: QEMU (the launcher;
# KVM where the CPU offers it, software emulation otherwise), qemu-img (copy-on-write overlays),
# debootstrap and mke2fs (ccbench's own guest image, built on first use and cached by content) and
# OVMF (the firmware SEV-SNP and TDX guests boot through); qemu.qmp, the QEMU project's own client
# of its monitor (pausing and resuming interleaved arms, pinning vCPUs)
apt_install qemu-system-x86 qemu-utils debootstrap e2fsprogs ovmf openssh-client
pip_install "qemu.qmp==0.0.6"
