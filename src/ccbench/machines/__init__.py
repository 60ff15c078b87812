"""Machines ccbench launches itself: a study of arms (a plain VM, its SEV-SNP and TDX twins, and one
mechanism twin per knob) from one image on one host (docs/machines.md).

The pure parts: ``study`` (the study file), ``qemu`` (one arm's QEMU command line), ``hostcheck``
(what the host lacks, and its facts), ``guestkernel`` (what the image's kernel lacks), ``arms``
(that arms differ only in their knobs)."""
