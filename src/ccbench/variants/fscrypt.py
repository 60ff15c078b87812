"""ext4 fscrypt (policy v2, AES-256-XTS contents, AES-256-CTS names) through the kernel's ioctls.

No cryptography happens here: the kernel encrypts. This module only hands it a random key and a
policy, the way fscryptctl does, so no global configuration (/etc/fscrypt.conf) is touched.
Layouts from <linux/fscrypt.h>.
"""

from __future__ import annotations

import fcntl
import os
import struct

FSCRYPT_POLICY_V2 = 2
FSCRYPT_MODE_AES_256_XTS = 1
FSCRYPT_MODE_AES_256_CTS = 4
FSCRYPT_POLICY_FLAGS_PAD_32 = 0x03
FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER = 2

# _IOR('f', 19, struct fscrypt_policy_v1): the kernel reads the version byte and then the v2 layout
FS_IOC_SET_ENCRYPTION_POLICY = 0x800C6613
# _IOWR('f', 23, struct fscrypt_add_key_arg) with an 80-byte fixed part
FS_IOC_ADD_ENCRYPTION_KEY = 0xC0506617
# _IOWR('f', 24, struct fscrypt_remove_key_arg), 64 bytes
FS_IOC_REMOVE_ENCRYPTION_KEY = 0xC0406618

KEY_BYTES = 64
CIPHER = "AES-256-XTS"


def add_key(mount_point: str, raw_key: bytes) -> bytes:
    """Add a v2 master key to the filesystem at mount_point; returns its 16-byte identifier."""
    key_spec = struct.pack("<II32s", FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER, 0, b"")
    arg = bytearray(key_spec + struct.pack("<II32s", len(raw_key), 0, b"") + raw_key)
    fd = os.open(mount_point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FS_IOC_ADD_ENCRYPTION_KEY, arg, True)
    finally:
        os.close(fd)
    # the kernel wrote the key identifier into key_spec.u.identifier
    return bytes(arg[8:24])


def set_policy(directory: str, identifier: bytes) -> None:
    policy = struct.pack(
        "<BBBB4s16s",
        FSCRYPT_POLICY_V2,
        FSCRYPT_MODE_AES_256_XTS,
        FSCRYPT_MODE_AES_256_CTS,
        FSCRYPT_POLICY_FLAGS_PAD_32,
        b"",
        identifier,
    )
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FS_IOC_SET_ENCRYPTION_POLICY, policy)
    finally:
        os.close(fd)


def remove_key(mount_point: str, identifier: bytes) -> None:
    arg = bytearray(struct.pack("<II16s16s", FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER, 0, identifier, b"") + bytes(24))
    fd = os.open(mount_point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FS_IOC_REMOVE_ENCRYPTION_KEY, arg, True)
    finally:
        os.close(fd)
