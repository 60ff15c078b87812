"""Tools' native outputs, parsed: the bottom layer that both ccbench's own workloads and
``ccbench import`` read through, so one tool's output has one meaning whichever road it came by.

A parser here takes what the tool wrote (a decoded JSON document, a line of text, a file name) and
returns ``ccbench.model.Measurement`` lists or plain records. It touches no file system and no
bundle, and raises ``FormatError`` (one line, what is wrong) for output it cannot read; the caller
names the file and turns it into its own error (``WorkloadFailed``, ``ImportProblem``).

- ``fio``: fio's JSON (``--output-format=json`` / ``json+``), fio 2.x and 3.x, ``--client`` output.
- ``pyperf``: pyperf's JSON format 1.0 (pyperf, pyperformance): every value a sample.
- ``seed000``: the seed-000 study's benchmark names (its CSV plan and its result files).
- ``cloudhypervisor``: cloud-hypervisor's performance-metrics report (per test a stated mean and spread).
- ``pts``: the Phoronix Test Suite's result file (``composite.xml``), parsed by defusedxml.
"""

from __future__ import annotations

from ccbench.basics.errors import CCBenchError


class FormatError(CCBenchError):
    """A tool's output that does not hold what its format promises (one line: what is wrong)."""
