"""ccbench compare's text on the terminal: the verdict per layer, its wide table, the settled cases, the
breakdowns, the lint's findings and the comparison table (ccbench.commands.compare chooses what to print)."""

from __future__ import annotations


def _print_verdict(
    table,
    executions,
    layers,
    excluded: str,
    details: bool = False,
    summary: bool = False,
    uncompared=(),
    machines: dict | None = None,
) -> None:
    """The verdict per protection layer: one line per layer (ccbench.analysis.judgement.headline), with
    ``details`` the verdict's wide table, then each layer's sentence."""
    from ccbench.analysis.judgement.headline import headline, terminal_width
    from ccbench.analysis.judgement.verdict_table import contention_counts, contention_words
    from ccbench.analysis.rows import pairing
    from ccbench.basics.console import say, stdout

    contended, executions, unrecorded = contention_counts(executions, machines)
    baselines, _ = pairing.baselines(table)  # the layers name a loop twin themselves
    # a workload without a storage axis stands against "A / no TEE", the others against "A / no TEE /
    # disk": the same baseline, named once by its fullest label
    baselines = [b for b in baselines if not any(set(b.split(" / ")) < set(o.split(" / ")) for o in baselines)]
    # a machine that stands against another's baseline and also against itself (its own layers) is
    # named apart from the baselines
    own = pairing.own_machines(table)
    baselines = [b for b in baselines if b.split(" / ")[0] not in own]
    machines = list(dict.fromkeys(b.split(" / ")[0] for b in baselines))
    against = baselines[0] if len(baselines) == 1 else "matched baselines " + ", ".join(machines)
    what = "verdict per protection layer" if len(baselines) == 1 else "verdict"
    title = f"{what} against {against}{pairing.own_note(table)}{excluded}; {contention_words(contended, executions, unrecorded)}"
    say(title)
    for line in headline(layers, full=not summary, width=terminal_width()):
        stdout.print(line, markup=False, highlight=False, soft_wrap=True)
    if uncompared:
        say(uncompared_line(uncompared))
    if details:
        _print_verdict_table(layers)
    if not summary:
        for item in layers:
            say(f"- {item.sentence()}")


def _print_settled(bundles, implausible: set[tuple[str, str, str, str]] = frozenset(), cases: bool = True) -> None:
    """For a bundle whose run settled its cases (``run --settle``): each case's answer, recomputed
    from its samples with the run's rule (the interval its record names, docs/analysis.md); and
    for a fleet that settled its cases across labels (``fleet run --mode rounds --settle``), each
    of those (ccbench.analysis.settling.fleet_settle). ``implausible``: (bundle, workload, variant key, case)
    of the settled cases whose rows are left out of the verdict: said beside their answer. Without
    ``cases`` (--summary): each header, and each layer's and settled variant's line, no case's."""
    from ccbench.analysis.settling.layer_settle import with_layers
    from ccbench.analysis.settling.recorded import bundle_settlements
    from ccbench.basics.console import say

    for bundle in bundles:
        for line in _settled_lines(bundle, with_layers(bundle, bundle_settlements(bundle)), implausible, cases):
            say(line)
    from ccbench.analysis.settling.fleet_settle import fleet_settlement_lines

    for line in fleet_settlement_lines((bundle.path for bundle in bundles), cases):
        say(line)


def _settled_lines(bundle, records: dict, implausible, cases: bool = True) -> list[str]:
    """One bundle's settled cases (ccbench.commands.run.settled_block) under a header where the
    interval or target changes. ``implausible``: (bundle, workload, variant key, case) of the cases
    whose rows the verdict leaves out."""
    from ccbench.commands.run import settled_block

    def flagged(name: str) -> set[tuple[str, str]]:
        return {
            (key, label) for path, workload, key, label in implausible if (path, workload) == (str(bundle.path), name)
        }

    def header(record: dict) -> str:
        return f"settled in {bundle.path.name} ({settled_on(record)}, target {record['target']:.1%}):"

    return settled_block(records, flagged, header, cases)


def settled_on(record: dict) -> str:
    """The interval a run's settle record says its cases were read on, as compare's header names it
    ("repeated interval, limit 10"; "anytime-valid interval" for a record that names none)."""
    from ccbench.analysis.labels import interval_name, interval_phrase
    from ccbench.analysis.statistics.sequential import record_limit

    return interval_phrase(interval_name(record_limit(record)))


def _medians_against(table) -> int:
    """How many rows' medians move one way while their ratio (of geometric means) moves the other."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        step = table["median"].to_numpy(dtype=float) - table["baseline_median"].to_numpy(dtype=float)
        return int((np.sign(step) * np.sign(table["ratio"].to_numpy(dtype=float) - 1) < 0).sum())


def uncompared_line(machines) -> str:
    """The machines no row compares, said under the verdict (ccbench.analysis.comparison.Comparison.uncompared)."""
    names = ", ".join(machines)
    return (
        f"not compared: {names} (no workload in common with the baseline it would stand against; "
        "name one with --pair CONFIG=BASELINE or --baseline)"
    )


def _longest_word(header: str, values) -> int:
    """A column's least width: its longest word (header included, at most 24 characters), so that a
    table too wide for the terminal wraps its cells between words, never inside one ("significan t")."""
    words = (word for text in [header, *map(str, values)] for word in text.split())
    return min(max((len(word) for word in words), default=1), 24)


def _print_verdict_table(layers) -> None:
    """The verdict's table, one block per layer: its fields down, each value beside its field wrapped
    at the terminal's width between words and never inside a figure (ccbench.basics.wrap.fit): eleven
    columns side by side were twice as wide as a 100-column terminal."""
    from ccbench.analysis.judgement.headline import fit, terminal_width
    from ccbench.analysis.judgement.verdict_table import verdict_table
    from ccbench.basics.console import stdout

    frame_text = verdict_table(layers)
    width = terminal_width()
    field_width = max(len(column) for column in frame_text.columns)
    stdout.print("verdict per protection layer, in detail", markup=False, highlight=False)
    for row in frame_text.to_dict(orient="records"):
        for column, value in row.items():
            line = fit(f"  {column:<{field_width}} {value}", width, indent=field_width + 3)
            stdout.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_breakdowns(table, parts) -> None:
    """Each cross-machine row's breakdown by mechanism, one line per row that has one."""
    from ccbench.analysis.rows.breakdown import UNEXPLAINED, breakdown_text
    from ccbench.basics.console import say

    # only where a mechanism was measured or a twin given: a row that is all "unexplained" says nothing
    lines = [
        f"- {row['workload']} {row['metric']} ({row['config']}): " + "; ".join(breakdown_text(p) for p in breakdown)
        for row, breakdown in zip(table.to_dict(orient="records"), parts, strict=True)
        if any(p.get("mechanism") != UNEXPLAINED for p in breakdown)
    ]
    if lines:
        say("breakdown of the cost by mechanism (share of the time added or the rate lost, 95% bootstrap interval):")
        for line in lines:
            say(line)


def _print_findings(findings, summary: bool = False, layers=()) -> None:
    """The lint's findings on the compared machines (docs/trust.md, Lint), after the verdict; with
    ``summary`` one line per kind of finding (its first instance, and how many more like it; rows
    the verdict's ``layers`` left out named once, by the verdict)."""
    from ccbench.basics.console import say, stdout
    from ccbench.probe.lint import format_findings

    if not findings:
        stdout.print("lint: no findings (docs/trust.md, Lint)")
        return
    stdout.print(f"lint: {len(findings)} finding{'s' if len(findings) != 1 else ''} (docs/trust.md, Lint)")
    if not summary:
        say(format_findings(findings))
        return
    from ccbench.analysis.judgement.headline import finding_lines, terminal_width

    for line in finding_lines(findings, terminal_width(), layers):
        stdout.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_comparison(table, excluded: str, details: bool = False, samples=None) -> None:
    """The comparison table grouped by workload, each verdict coloured (slower red, faster green; "~"
    not significant): by default one row per case and primary metric with the narrow columns; with
    ``details`` every metric and every column."""
    from rich.table import Table

    from ccbench.analysis.judgement import impact
    from ccbench.analysis.rows import pairing
    from ccbench.analysis.table import NARROW_HEADERS, comparison_table
    from ccbench.basics.console import stdout

    shown = table
    if not details:
        primary = impact.primary_mask(table, impact.declarations(samples))
        if primary.any():
            shown = table[primary]
    order = {w: i for i, w in enumerate(dict.fromkeys(shown["workload"]))}
    shown = shown.iloc[sorted(range(len(shown)), key=lambda i: order[shown["workload"].iloc[i]])]
    baselines, twins = pairing.baselines(shown)
    left = len(table) - len(shown)
    title = f"baseline: {', '.join(baselines)}{twins}{excluded}"
    if left:
        title += f"; {left} supporting-metric rows behind --details"
    against = _medians_against(shown)
    if against:
        title += (
            f"; in {against} row{'s' if against != 1 else ''} the medians move the other way from the effect (a ratio "
            "of geometric means, as every interval here is): a few executions carry the difference"
        )
    out = Table(title=title, title_justify="left")
    cells = comparison_table(shown)
    if not details:
        cells = cells[[c for c in NARROW_HEADERS if c in cells.columns]]
    for column in cells.columns:
        # an effect is one figure with its interval: never wrapped inside it ("2.3x" / "slower]")
        whole = column.startswith("effect")
        least = max(len(str(v)) for v in [column, *cells[column]]) if whole else _longest_word(column, cells[column])
        out.add_column(column, overflow="fold", min_width=least)
    index = list(cells.columns).index("verdict")
    previous = None
    for row, verdict_word, workload in zip(cells.itertuples(index=False), cells["verdict"], shown["workload"]):
        values = list(row)
        colour = "red" if verdict_word == "slower" else "green" if verdict_word == "faster" else ""
        values[index] = (
            f"[{colour}]{verdict_word}[/{colour}]"
            if colour
            else ("~" if verdict_word == "not significant" else verdict_word)
        )
        if previous is not None and workload != previous:
            out.add_section()
        previous = workload
        out.add_row(*values)
    stdout.print(out, crop=False)
