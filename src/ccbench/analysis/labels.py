"""Names a comparison's rows carry that several rooms of the analysis read: the loop-file control and
the ciphers built on a loop file (ccbench.analysis.pairing sets a cipher against its loop twin), and the
settle rule's answers and interval (ccbench.analysis.sequential makes them; the tables print them).
Kept below both so that the words (ccbench.analysis.format) need neither."""

from __future__ import annotations

#: the storage variant that is the encrypted variants' loop-file stack without their cipher
#: (ccbench.variants.storage.LOOP_CONTROL): a control, not a protection layer
LOOP_CONTROL = "ext4-loop"
#: the storage labels (ccbench.analysis.load.storage_label) of ciphers ccbench builds on a loop file
ON_LOOP = frozenset({"fscrypt", "luks2", "encrypted:fscrypt", "encrypted:luks"})


def loop_twin(config: str) -> str | None:
    """The same configuration with ``ext4-loop`` for its storage, for a cipher on a loop file
    ("vm / no TEE / fscrypt" -> "vm / no TEE / ext4-loop"); None for any other."""
    parts = str(config).split(" / ")
    on_loop = [i for i, part in enumerate(parts) if part in ON_LOOP]
    if len(on_loop) != 1:
        return None
    parts[on_loop[0]] = LOOP_CONTROL
    return " / ".join(parts)


#: a settled case's answers (ccbench.analysis.sequential.settle)
COST, GAIN, NO_COST_ABOVE = "cost", "gain", "no cost above"
#: the name of the settle rule's interval where a comparison row uses it (ccbench.analysis.settled)
ANYTIME = "anytime-valid"
#: the interval built for a run's round limit (ccbench.analysis.repeated): a settle record's
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
