"""Build the bundled .ipynb files from their percent-format sources in sources/.

    python -m ccbench.notebooks.build        # rewrite every notebook whose source changed

A source is a Python file whose cells start with ``# %%`` (code) or ``# %% [markdown]``
(markdown; each line written as a ``# `` comment). ``# %% tags=["parameters"]`` tags a cell.
The .ipynb files are what ships and runs; the sources are what people edit and review.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
_MARKER = re.compile(r"^# %%(?P<markdown> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def cells_of(text: str) -> list:
    cells = []
    kind, tags, lines = None, [], []

    def flush() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines())
            cell = nbformat.v4.new_markdown_cell(body)
        else:
            cell = nbformat.v4.new_code_cell(body)
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in text.splitlines():
        match = _MARKER.match(line)
        if match:
            flush()
            kind = "markdown" if match.group("markdown") else "code"
            tags = json.loads(match.group("tags")) if match.group("tags") else []
            lines = []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def build(source: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells_of(source.read_text())
    # ids derived from the name and position keep rebuilds byte-identical
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"{source.stem[:20]}-{index:02d}".replace("_", "-")
    nb.metadata["kernelspec"] = {"name": "ccbench-python3", "display_name": "ccbench (Python 3)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.validate(nb)
    target = HERE / f"{source.stem}.ipynb"
    target.write_text(nbformat.writes(nb) + "\n")
    return target


def main(argv: list[str]) -> int:
    sources = [Path(a) for a in argv] or sorted((HERE / "sources").glob("*.py"))
    for source in sources:
        print(build(source))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
