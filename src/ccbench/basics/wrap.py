"""Prose for a terminal: the one wrapper every paragraph ccbench prints goes through (the verdict,
compare's sentences, the lint's findings, ``env``, ``plans``, the run's warnings).

A line too long for the terminal goes on, indented, on the next (at ``$COLUMNS``, 100 for a pipe),
never cut inside a figure: it breaks only at a space outside brackets and parentheses, and never
between a number and its unit ("13.7 us", "9.0x slower"), a statistic's name and its value ("I2 0%"),
the ends of a count or range ("13 of 30", "4.3x to 5.5x") or a flag and its value ("--pair
CONFIG=BASELINE"). A word wider than the line (a long path) stays whole. Tables are not wrapped here.
"""

from __future__ import annotations

import os
import re
import shutil

WIDTH = 100

#: a word that ends in a number: "13.7", "(0.246", "2.9x", "81%", "1,184x", "~5"
_NUMBER = re.compile(r"^[(\[]*[-+~≈<>≤≥]?\d[\d,.]*(?:e[-+]?\d+)?[%x]?$")
#: the unit (or direction) a number is read with, with any punctuation after it
_UNIT = re.compile(
    r"^(?:%|x|slower|faster|[kMGTP]?i?B|[kMG]?bit|[a-zA-Z]+/s|[munµ]?s|min|h|IOPS|ops|cycles|pages|"
    r"[kMG]?Hz|W|pp|°C|vCPUs?|CPUs?|cores?|threads?|rounds?)[,;:.)\]]*$"
)
#: a word that joins two numbers into one figure: "13 of 30", "4.3x to 5.5x", "6.8 vs 6.5"
_JOINS = {"of", "to", "vs", "x", "±", "-", "/"}
#: a statistic's name read with its value: "I2 0%", "Q 3.1", "p 0.04"
_STAT = re.compile(r"^[(\[]*(?:I2|I²|Q|p|n|df|t|z|MDE|CV)$")
_FLAG = re.compile(r"^[(\[]*--?[A-Za-z][\w-]*$")
#: what a flag takes: a metavariable (CONFIG=BASELINE), a number, a path, a key=value
_VALUE = re.compile(r"^(?:[A-Z][A-Z0-9_]*(?:=[A-Z0-9_*]+)?|[\d/~.].*|\S*=\S*)$")


def terminal_width(default: int = WIDTH) -> int:
    """The width lines are wrapped to: the terminal's (or $COLUMNS), ``default`` for a pipe."""
    if os.environ.get("COLUMNS", "").isdigit():
        return max(int(os.environ["COLUMNS"]), 40)
    size = shutil.get_terminal_size((0, 0)).columns
    return max(size, 40) if size else default


def _joined(words: list[str], index: int) -> bool:
    """Whether the space between ``words[index]`` and the next one lies inside a figure."""
    left, right = words[index], words[index + 1]
    if _NUMBER.match(left) and (_UNIT.match(right) or right in _JOINS and _next_is_number(words, index + 1)):
        return True
    if left in _JOINS and index > 0 and _NUMBER.match(words[index - 1]) and _NUMBER.match(right.rstrip(",;:)]")):
        return True
    if _STAT.match(left) and re.match(r"^[-+=<>~]?\d", right):
        return True
    return bool(_FLAG.match(left) and _VALUE.match(right.rstrip(",;:)]")))


def _next_is_number(words: list[str], index: int) -> bool:
    return index + 1 < len(words) and bool(_NUMBER.match(words[index + 1].rstrip(",;:)]")))


def _glue(words: list[str], room: int) -> list[str]:
    """``words`` with each figure made one word, as long as it fits ``room`` (a figure wider than the
    line would overflow it: broken at its space instead)."""
    out: list[str] = []
    for index, word in enumerate(words):
        if out and _joined(words, index - 1) and len(out[-1]) + 1 + len(word) <= room:
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def _words(text: str, room: int | None = None, opening: str = "[(") -> list[str]:
    """``text`` split at the spaces outside brackets and parentheses and outside figures: a figure
    with its interval ("0.99x [0.95x, 1.03x]") and a parenthesised note stay whole; a note longer
    than ``room`` is split in its turn, at its spaces outside square brackets (an interval is never
    split) and outside figures."""
    closing = "])" if opening == "[(" else "]"
    words, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in opening:
            depth += 1
        elif char in closing:
            depth = max(depth - 1, 0)
        elif char == " " and depth == 0:
            words.append(text[start:index])
            start = index + 1
    words.append(text[start:])
    if room is None:
        return words
    words = _glue(words, room)
    if opening == "[":
        return words
    return [part for word in words for part in (_words(word, room, "[") if len(word) > room else [word])]


def fit(text: str, width: int | None = WIDTH, indent: int | None = None) -> str:
    """``text`` (one paragraph) within ``width`` columns: wrapped at a space outside any bracket and
    any figure, its further lines indented under its first (by 4, or at column ``indent``: under a
    value beside its key), never cut (None: one line whatever its length); a key is never left alone
    on its line ("bundle: PATH" with a long path stays one line), nor a word before one longer than
    any line."""
    if width is None or len(text) <= width:
        return text
    lead = len(text) - len(text.lstrip(" "))
    indent_text = " " * (lead + 4 if indent is None else min(indent, width // 2))
    lines, line = [], " " * lead
    for word in _words(text[lead:], width - len(indent_text)):
        # a key is never left alone on its line ("bundle: PATH" with a long path): its value stays
        # beside it, and so does a word no line can hold
        alone = len(line.split()) == 1
        lone_key = alone and (line.strip().endswith(":") or len(indent_text) + len(word) > width)
        if line.strip() and len(line) + 1 + len(word) > width and not lone_key:
            lines.append(line)
            line = indent_text + word
        else:
            line = line + (" " if line.strip() else "") + word
    lines.append(line)
    return "\n".join(lines)


def fit_block(text: str, width: int | None = WIDTH, indent: int | None = None) -> str:
    """Each line of ``text`` fitted on its own (its indentation kept): for text made of several
    paragraphs, one a line (the lint's findings with their remedy and source)."""
    return "\n".join(fit(line, width, indent) for line in text.split("\n"))
