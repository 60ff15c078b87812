"""How a ccbench command is stopped: the signals that end it through its clean-up, installed and
put back. Standard library only (the CLI installs them before any command is imported)."""

from __future__ import annotations

import signal

#: the signals that stop a command cleanly: Ctrl-C, a polite kill, and the hang-up a terminal or an
#: SSH session sends to its processes when it goes away
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def catch_stop_signals(handler, signals=STOP_SIGNALS) -> dict:
    """Install ``handler`` for the stop signals (or those of ``signals``) and return what was there
    (for ``restore_signals``). A SIGHUP the process was started ignoring (``nohup``, a fleet host's
    supervisor) stays ignored: whoever started it asked it to outlive its session."""
    previous = {}
    for sig in signals:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, handler)
    return previous


def restore_signals(previous: dict) -> None:
    """Put back the dispositions ``catch_stop_signals`` found, whatever they were (a handler,
    SIG_IGN inherited from a background launch, SIG_DFL)."""
    for sig, old in previous.items():
        signal.signal(sig, old if old is not None else signal.SIG_DFL)


def block_stop_signals():
    """Hold the stop signals back (returns the old mask for SIG_SETMASK): a second Ctrl-C or a
    hang-up during a clean-up cannot leave a mount or a namespace behind."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
