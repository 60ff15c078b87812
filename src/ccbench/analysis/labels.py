"""Names a comparison's rows carry that several rooms of the analysis read: the loop-file control and
the ciphers built on a loop file (ccbench.analysis.rows.pairing sets a cipher against its loop twin), what
storage a storage label is (the one rule the layers, the baseline and the lint read), and the
settle rule's answers and interval (ccbench.analysis.statistics.sequential makes them; the tables print them).
Kept below both so that the words (ccbench.analysis.format) need neither."""

from __future__ import annotations

import re

#: the storage variant that is the encrypted variants' loop-file stack without their cipher
#: (ccbench.variants.storage.LOOP_CONTROL): a control, not a protection layer
LOOP_CONTROL = "ext4-loop"
#: the storage labels (ccbench.analysis.samples.load.storage_label) of ciphers ccbench builds on a loop file
ON_LOOP = frozenset({"fscrypt", "luks2", "encrypted:fscrypt", "encrypted:luks"})

#: what a storage variant is, as the layer it adds (ccbench.analysis.rows.layers.storage_layer names it,
#: ccbench.analysis.rows.baselines.protection_count counts it): memory, a cipher, the loop-file control,
#: or nothing at all (the disk; a directory of the user's that protects nothing)
IN_MEMORY, ENCRYPTION, LOOP_FILE, NO_PROTECTION = (
    "in-memory storage",
    "storage encryption",
    "loop file, no cipher",
    "own path, no protection",
)
#: a ``--storage-path`` variant's label: "tmpfs (own path, plain)", the name the user gave it and what
#: ccbench.probe.storage.describe_path found its directory to be (its recorded ``storage_protection``)
OWN_PATH = "own path"
#: each ``storage_protection`` describe_path finds, as the storage it is ("unknown" is none of them)
FOUND = {
    "tmpfs": IN_MEMORY,
    "ramfs": IN_MEMORY,
    "dm-crypt": ENCRYPTION,
    "fscrypt": ENCRYPTION,
    "fuse": ENCRYPTION,
    "plain": NO_PROTECTION,
}
_OWN = re.compile(rf"^(?P<name>.*) \({OWN_PATH}(?:, (?P<found>[^()]+))?\)$")


def own_path_label(name: str, protection: object) -> str:
    """The label of a ``--storage-path`` variant named ``name`` whose directory was found to be
    ``protection``: "tmpfs (own path, plain)"; "tmpfs (own path)" where it is unknown or not recorded
    (a bundle from before ccbench recorded it), read by its name alone."""
    return f"{name} ({OWN_PATH}, {protection})" if protection in FOUND else f"{name} ({OWN_PATH})"


def named_kind(name: str) -> str:
    """The storage a variant's name says it is (IN_MEMORY, ENCRYPTION, LOOP_FILE or NO_PROTECTION):
    tmpfs, ext4-loop, disk; any other name (encrypted, fscrypt, luks2, ...) a cipher."""
    if name.startswith("tmpfs"):
        return IN_MEMORY
    if name.startswith(LOOP_CONTROL):  # its cost is the loop file's, not a cipher's
        return LOOP_FILE
    if name == "disk":
        return NO_PROTECTION
    return ENCRYPTION


def storage_kind(label: str) -> str:
    """The storage a label is: for a ``--storage-path`` variant, what its directory was found to be
    (own_path_label), else what its name says (named_kind)."""
    name, found = own_path_parts(label)
    return FOUND[found] if found in FOUND else named_kind(name)


def own_path_parts(label: str) -> tuple[str, str | None]:
    """(the name, what the directory was found to be, or None) of a label; (the label, None) for a
    label that is no ``--storage-path`` variant's."""
    match = _OWN.match(str(label))
    return (match["name"], match["found"]) if match else (str(label), None)


def loop_twin(config: str) -> str | None:
    """The same configuration with ``ext4-loop`` for its storage, for a cipher on a loop file
    ("vm / no TEE / fscrypt" -> "vm / no TEE / ext4-loop"); None for any other."""
    parts = str(config).split(" / ")
    on_loop = [i for i, part in enumerate(parts) if part in ON_LOOP]
    if len(on_loop) != 1:
        return None
    parts[on_loop[0]] = LOOP_CONTROL
    return " / ".join(parts)


#: a settled case's answers (ccbench.analysis.statistics.sequential.settle)
COST, GAIN, NO_COST_ABOVE = "cost", "gain", "no cost above"
#: the name of the settle rule's interval where a comparison row uses it (ccbench.analysis.settling.settled)
ANYTIME = "anytime-valid"
#: the interval built for a run's round limit (ccbench.analysis.statistics.repeated): a settle record's
#: ``interval`` where its run used it (a record without one used ANYTIME)
REPEATED = "repeated"


def interval_name(limit: int | None) -> str:
    """The name of the interval a settled case is read on: the repeated interval for its round limit
    ("repeated interval, limit 10"), ANYTIME without a limit (and past it)."""
    return f"repeated interval, limit {limit}" if limit else ANYTIME


def is_settle_interval(name: object) -> bool:
    """Whether a row's ``interval`` is a settle rule's (ANYTIME or a repeated interval), not compare's own."""
    return isinstance(name, str) and (name == ANYTIME or name.startswith("repeated interval"))


def interval_phrase(name: str) -> str:
    """The interval's name in a sentence: "anytime-valid interval", "repeated interval, limit 10"."""
    return f"{name} interval" if name == ANYTIME else name
