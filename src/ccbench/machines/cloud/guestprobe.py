"""The guest's own TEE evidence before any plan runs. ccbench's TEE detector (``ccbench.probe.tee``
with its two standard-library-only neighbours ``sources`` and ``tee_roles``: the very modules every
bundle's probe runs) goes over the run's strict SSH to the instance's ``python3`` as one script on
stdin, runs there as root (``sudo -n`` for the run's user, as the fleet's become does: the kernel
log and the SEV status MSR need it; CPUID is executed in the guest), and prints the detector's
document. Nothing is installed and nothing is left behind; the answer is checked against the arm's
kind (``tee.check_guest``) before the first plan turn, so a confidential arm whose guest shows no
TEE costs one SSH call, not a turn."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccbench.basics.errors import EnvironmentProblem

#: the detector and what it imports, in import order (each imports only the standard library and
#: the ones before it)
MODULES = ("ccbench.probe.sources", "ccbench.probe.tee_roles", "ccbench.probe.tee")

_RUN = """
import json, sys, types
for name in ("ccbench", "ccbench.probe"):
    package = types.ModuleType(name)
    package.__path__ = []
    sys.modules[name] = package
for name, text in SOURCES:
    module = types.ModuleType(name)
    module.__file__ = "<ccbench " + name + ">"
    sys.modules[name] = module
    exec(compile(text, module.__file__, "exec"), module.__dict__)
tee, sources = sys.modules["ccbench.probe.tee"], sys.modules["ccbench.probe.sources"]
print(json.dumps({"tee": tee.detect(sources.Sources())}))
"""


def script() -> str:
    """The Python program the guest runs: the detector's modules as this ccbench has them, then the run."""
    modules = []
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:  # pragma: no cover - an installation without its probe
            raise EnvironmentProblem(f"ccbench's own {name} is missing from this installation: reinstall ccbench")
        modules.append((name, Path(spec.origin).read_text(encoding="utf-8")))
    return f"SOURCES = {modules!r}\n{_RUN}"


def probe_tee(ssh: Callable[..., Any], instance: str, root: bool) -> dict[str, Any]:
    """The probe document ({"tee": ...}) of one instance, through ``ssh(command, stdin)``; one line
    naming the instance when the probe cannot run or says nothing readable."""
    command = "python3 -" if root else "sudo -n python3 -"
    done = ssh(command, script())
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise EnvironmentProblem(
            f"instance {instance}: ccbench's TEE probe did not run in its guest ({last[:200]}); stopping the study "
            "before any plan turn"
        )
    try:
        document = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise EnvironmentProblem(
            f"instance {instance}: ccbench's TEE probe printed no document ({done.stdout.strip()[:120]!r}); "
            "stopping the study before any plan turn"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("tee"), dict):
        raise EnvironmentProblem(f"instance {instance}: ccbench's TEE probe answered without a 'tee' document")
    return document
