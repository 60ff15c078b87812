#!/usr/bin/env bash
# storage variants (tmpfs, fscrypt on ext4 loop files, gocryptfs, LUKS) and the compression workload
apt_install e2fsprogs gocryptfs fuse3 cryptsetup-bin zstd gzip
