"""The Phoronix Test Suite's result file (``composite.xml``), read as PTS writes it
(``pts_result_file::get_xml``; the schema is OpenBenchmarking.org's ``result-file.xsd``):

- ``Generated``: the result's ``Title``, ``LastModified``, ``TestClient`` (PTS's version), ``Description``;
- one ``System`` per configuration the file compares (each run saved under the same result name
  adds one): its ``Identifier``, ``Hardware`` and ``Software`` (``Key: value`` pairs joined by
  ``, ``: ``Processor: ... (4 Cores)``, ``Memory: 4096MB``, ``Kernel: 5.4.72-v7l+ (armv7l)``,
  ``System Layer: KVM``), ``User``, ``TimeStamp``, ``TestClientVersion``, ``Notes``, ``JSON``;
- one ``Result`` per test and option set: ``Identifier`` (``pts/ramspeed-1.4.3``), ``Title``,
  ``AppVersion``, ``Arguments``, ``Description`` (the options in words), ``Scale`` (the unit),
  ``Proportion`` (``HIB`` higher is better, ``LIB`` lower, ``ABSTRACT`` neither),
  ``DisplayFormat``, an optional ``Parent`` (a figure derived from another result), and ``Data``:
  per system an ``Entry`` with its ``Identifier``, ``Value`` (the mean of the runs) and
  ``RawString`` (every run's value, ``:``-separated), and a ``JSON`` of extras (``min-result``,
  ``max-result``, ``test-run-times``, ``compiler-options``, ``error``).

Only ``BAR_GRAPH`` results hold one figure per run; the others (line graphs of a sensor,
pass/fail, image comparisons) do not.

The XML is parsed by defusedxml, refusing a DTD (PTS writes none): a hostile file cannot expand
entities or reach for external ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from ccbench.formats import FormatError

ROOT = "PhoronixTestSuite"
#: the display format whose entries are one figure per run
PER_RUN = "BAR_GRAPH"
BETTER = {"HIB": "higher", "LIB": "lower"}
#: a ", " that starts the next "Key: value" pair of a Hardware or Software string
_PAIR = re.compile(r",\s+(?=[A-Z][A-Za-z0-9 /-]{0,40}:\s)")
_PROCESSOR = re.compile(
    r"^(?:(?P<sockets>\d+)\s*x\s*)?(?P<model>.+?)\s*\((?P<cores>\d+)\s+Cores?(?:\s*/\s*(?P<threads>\d+)\s+Threads?)?\)"
)
_MEMORY = re.compile(r"^(?:(?P<count>\d+)\s*x\s*)?(?P<size>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT])i?B\b", re.IGNORECASE)
_BINARY = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


@dataclass
class System:
    identifier: str
    hardware: str = ""
    software: str = ""
    user: str = ""
    timestamp: str = ""
    client_version: str = ""
    notes: str = ""
    json: dict[str, Any] = field(default_factory=dict)

    def facts(self) -> dict[str, Any]:
        """What the Hardware and Software strings state, in ccbench's fact names, beside each pair as PTS
        names it (``pts_hardware``, ``pts_software``)."""
        hardware, software = pairs(self.hardware), pairs(self.software)
        facts: dict[str, Any] = {"pts_hardware": hardware, "pts_software": software}
        processor = _PROCESSOR.match(hardware.get("Processor", ""))
        if processor:
            facts["cpu_model"] = processor["model"]
            facts["cpu_cores"] = int(processor["cores"])
            if processor["threads"]:
                facts["cpu_threads"] = int(processor["threads"])
            if processor["sockets"]:
                facts["cpu_sockets"] = int(processor["sockets"])
        elif hardware.get("Processor"):
            facts["cpu_model"] = hardware["Processor"]
        memory = _MEMORY.match(hardware.get("Memory", ""))
        if memory:
            facts["memory_bytes"] = round(
                int(memory["count"] or 1) * float(memory["size"]) * _BINARY[memory["unit"].upper()]
            )
        kernel = software.get("Kernel", "")
        if kernel:
            facts["kernel_release"] = kernel.split(" (", 1)[0].strip()
        for key, name in (("OS", "os"), ("System Layer", "system_layer"), ("File-System", "filesystem")):
            if software.get(key):
                facts[name] = software[key]
        return facts


@dataclass
class Entry:
    system: str
    value: str
    raw: str
    json: dict[str, Any] = field(default_factory=dict)


@dataclass
class Result:
    identifier: str
    title: str
    app_version: str
    arguments: str
    description: str
    scale: str
    proportion: str
    display_format: str
    parent: str
    entries: list[Entry]

    @property
    def better(self) -> str | None:
        return BETTER.get(self.proportion.strip())


@dataclass
class ResultFile:
    generated: dict[str, str]
    systems: list[System]
    results: list[Result]


def pairs(text: str) -> dict[str, str]:
    """A Hardware or Software string's ``Key: value`` pairs (the first of each key)."""
    found: dict[str, str] = {}
    for part in _PAIR.split(text or ""):
        key, colon, value = part.partition(":")
        if colon and key.strip():
            found.setdefault(key.strip(), value.strip())
    return found


def _text(element, name: str) -> str:
    child = element.find(name) if element is not None else None
    return (child.text or "").strip() if child is not None else ""


def _json(text: str) -> dict[str, Any]:
    try:
        decoded = json.loads(text) if text else {}
    except ValueError:
        return {"unreadable": text}
    return decoded if isinstance(decoded, dict) else {"value": decoded}


def parse(text: str) -> ResultFile:
    """The result file's systems and results; FormatError for XML that is broken, hostile or not PTS's."""
    try:
        root = fromstring(text, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise FormatError(
            f"the XML declares a DTD or entities ({type(exc).__name__}), which PTS never writes"
        ) from None
    except ParseError as exc:
        raise FormatError(f"not complete XML ({exc})") from None
    if root.tag != ROOT:
        raise FormatError(f"its root element is <{root.tag}>, not <{ROOT}>")
    systems = [
        System(
            identifier=_text(s, "Identifier"),
            hardware=_text(s, "Hardware"),
            software=_text(s, "Software"),
            user=_text(s, "User"),
            timestamp=_text(s, "TimeStamp"),
            client_version=_text(s, "TestClientVersion"),
            notes=_text(s, "Notes"),
            json=_json(_text(s, "JSON")),
        )
        for s in root.findall("System")
    ]
    if not systems or any(not s.identifier for s in systems):
        raise FormatError("it names no system (each <System> needs an <Identifier>)")
    results = [
        Result(
            identifier=_text(r, "Identifier"),
            title=_text(r, "Title"),
            app_version=_text(r, "AppVersion"),
            arguments=_text(r, "Arguments"),
            description=_text(r, "Description"),
            scale=_text(r, "Scale"),
            proportion=_text(r, "Proportion"),
            display_format=_text(r, "DisplayFormat") or PER_RUN,
            parent=_text(r, "Parent"),
            entries=[
                Entry(_text(e, "Identifier"), _text(e, "Value"), _text(e, "RawString"), _json(_text(e, "JSON")))
                for e in r.findall("Data/Entry")
            ],
        )
        for r in root.findall("Result")
    ]
    generated = root.find("Generated")
    facts = {child.tag: (child.text or "").strip() for child in generated} if generated is not None else {}
    return ResultFile(generated=facts, systems=systems, results=results)


def run_values(entry: Entry) -> list[float] | None:
    """Every run's value of an entry (its RawString), or None where the file gives none (then Value is
    the only figure: a mean of an unknown number of runs). FormatError for values that are not numbers."""
    if not entry.raw:
        return None
    try:
        return [float(part) for part in entry.raw.split(":") if part.strip()]
    except ValueError:
        raise FormatError(f"system {entry.system!r}: its run values {entry.raw[:60]!r} are not numbers") from None


def mean_value(entry: Entry) -> float | None:
    """The entry's Value as a number, or None (a failed or non-numeric result)."""
    try:
        return float(entry.value)
    except ValueError:
        return None
