#!/usr/bin/env bash
# storage variants (tmpfs, ext4 loop files with fscrypt, gocryptfs, LUKS) and the compression workload
# mount/util-linux: mount, losetup (loop files with direct I/O), setpriv (the non-root test)
apt_install mount util-linux e2fsprogs gocryptfs fuse3 cryptsetup-bin zstd gzip
