"""The class report: one self-contained HTML page an instructor reads in a minute after a class regrade.

It reads the gradebook rows and each graded student's JSON report and shows the headline numbers, the score
distributions (overall and per piece), the cases the class fails most with the hints they gave (what to teach
again), the repositories to look at (late, ungraded, changed release files) and the similarity pairs. The page
needs nothing else: the plots are PNGs drawn with matplotlib's Agg renderer and embedded as base64, there is no
script, and a Content-Security-Policy forbids loading anything. The same inputs give byte-identical HTML.

Everything a student may have influenced (names, paths, statuses, the judge's hints, which can quote their
text) passes `report.safe` and is HTML-escaped. A report file is read without following a link, up to
MAX_REPORT bytes; one that is missing, too big or malformed is skipped and the page says so.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from grader.runner.report import safe
from grader.runner.report import title as case_title
from grader.files import Refused, is_link, read_regular

MAX_REPORT = 4 << 20  # a real report is tens of kB; a bigger file is not one the batch wrote
TOP_CASES = 15
TOP_HINTS = 3  # hints shown per failing case
MAX_PAIRS = 50  # similarity pairs shown (the similarity report has them all)
MAX_NOTES = 50  # skipped reports named one by one
INTEGER_BARS = 80  # up to this many points a histogram has one bar per score
# the look of every plot; parse_math off: a `$` in a piece name must not start mathtext
STYLE = {"font.size": 9, "axes.titlesize": 9.5, "axes.titleweight": "bold", "axes.spines.top": False,
         "axes.spines.right": False, "text.parse_math": False, "figure.dpi": 100, "savefig.dpi": 100}
BLUE, GREEN, RED, GREY = "#4a78b5", "#2e8b57", "#c0392b", "#555555"
# numbers in a hint (an error size, a shape) differ between students: hints that differ only there are one hint
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# no script, no fetch, no form: the page shows its own inline style and data: images only
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


# --- reading the inputs ---------------------------------------------------------------------------------------

def _e(value: object, limit: int = 300) -> str:
    """Untrusted text for HTML: one printable line (report.safe drops controls and bidi overrides), escaped."""
    return html.escape(safe("" if value is None else value, limit), quote=True)


def _num(value: object) -> float | None:
    """A finite number from a raw or CSV-read cell; None for "", None, a bool or text."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    return str(int(x)) if float(x).is_integer() else f"{x:.{digits}f}"


def _text(row: dict, key: str) -> str:
    value = row.get(key)
    return "" if value is None else str(value)


def _is_error(row: dict) -> bool:
    return _text(row, "status").lstrip().lower().startswith("error")


def _late(row: dict) -> int | None:
    """The row's count of later, ungraded commits; None where the gradebook has no deadline information."""
    n = _num(row.get("late"))
    return None if n is None else int(n)


def _student(row: dict) -> str:
    return _text(row, "student")


def _by_name(rows: list[dict]) -> list[dict]:
    """Rows in the gradebook's own order (by student name), so every section reads the same way."""
    return sorted(rows, key=lambda r: (_student(r).lower(), _student(r)))


def _read_report(folder: Path | None, student: str) -> tuple[dict | None, str]:
    """A student's report, or None and why it was skipped. A name that is not a plain file name is never a
    path: it cannot lead the read out of the folder."""
    if folder is None:
        return None, "no reports folder"
    if not student or student in (".", "..") or any(c in student for c in "/\\\0") or len(student) > 255:
        return None, "not a plain file name"
    path = folder / f"{student}.json"
    if not os.path.lexists(path):
        return None, "missing"
    if is_link(path):
        return None, "a symbolic link (never followed)"
    try:
        data = read_regular(path, MAX_REPORT, path.name)
    except Refused:  # intake's reason speaks to a student; this page to the instructor
        return None, "not a regular, readable file"
    if data is None:
        return None, f"over {MAX_REPORT >> 20} MB"
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return None, "not valid JSON"
    if not isinstance(report, dict) or not isinstance(report.get("pieces"), list):
        return None, "not a graded report (no pieces)"
    return report, ""


@dataclass(frozen=True)
class Case:
    piece: str
    name: str
    passed: bool
    skipped: bool
    max_points: float
    message: str


def _cases(report: dict) -> Iterator[Case]:
    """The well-formed cases of a report; anything else in it is ignored."""
    for piece in report["pieces"]:
        if not isinstance(piece, dict) or not isinstance(piece.get("cases"), list):
            continue
        for c in piece["cases"]:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                yield Case(str(piece.get("name", "")), c["name"], c.get("passed") is True, c.get("skipped") is True,
                           _num(c.get("max_points")) or 0.0, str(c.get("message") or ""))


def _piece_max(reports: list[dict]) -> dict[str, float]:
    """Each piece's most common max_score over the reports (a quick run has fewer points than a full one)."""
    seen: dict[str, Counter] = {}
    for report in reports:
        for piece in report["pieces"]:
            if isinstance(piece, dict) and (top := _num(piece.get("max_score"))) is not None:
                seen.setdefault(str(piece.get("name", "")), Counter())[top] += 1
    return {name: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for name, c in seen.items()}


# --- what the page says ----------------------------------------------------------------------------------------

@dataclass
class Failing:
    """One case, over the graded students: how many failed it and with which hints."""
    piece: str
    name: str
    ran: int = 0
    failed: int = 0
    lost: float = 0.0
    hints: dict[str, Counter] = field(default_factory=dict)  # hint with numbers masked -> exact texts

    def top_hints(self) -> list[tuple[int, str, int]]:
        """(students, the hint's most common wording, how many wordings) for the most common hints."""
        out = []
        for texts in self.hints.values():
            text = min(texts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            out.append((sum(texts.values()), text, len(texts)))
        return sorted(out, key=lambda t: (-t[0], t[1]))[:TOP_HINTS]


def failing_cases(reports: list[dict], pieces: list[str]) -> list[Failing]:
    """The cases failed most often (a skipped case has not failed), most failures first, then in piece order."""
    cases: dict[tuple[str, str], Failing] = {}
    for report in reports:
        for c in _cases(report):
            if c.skipped:
                continue
            f = cases.setdefault((c.piece, c.name), Failing(c.piece, c.name))
            f.ran += 1
            if not c.passed:
                f.failed += 1
                f.lost += c.max_points
                message = safe(c.message, 300)
                f.hints.setdefault(_NUMBER.sub("#", message), Counter())[message] += 1
    order = {p: i for i, p in enumerate(pieces)}
    ranked = sorted((f for f in cases.values() if f.failed),
                    key=lambda f: (-f.failed, order.get(f.piece, len(order)), f.piece, f.name))
    return ranked[:TOP_CASES]


@dataclass
class Summary:
    students: int
    graded: list[dict]
    errors: list[dict]
    late: list[dict]
    has_deadline: bool
    totals: list[float]
    max_score: float | None
    modes: Counter

    @property
    def quick(self) -> int:
        return self.modes.get("quick", 0)


def _most_common(counts: Counter) -> float | None:
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counts else None


def summarize(rows: list[dict], reports: list[dict]) -> Summary:
    graded = [r for r in rows if not _is_error(r)]
    totals = [t for r in graded if (t := _num(r.get("total"))) is not None]
    # the gradebook's max_score; a report's where the rows lack it
    max_score = _most_common(Counter(t for r in graded if (t := _num(r.get("max_score"))) is not None)) \
        or _most_common(Counter(t for rep in reports if (t := _num(rep.get("max_score"))) is not None))
    late = sorted((r for r in rows if (_late(r) or 0) > 0),
                  key=lambda r: (-(_late(r) or 0), _student(r).lower(), _student(r)))
    modes = Counter(_text(r, "mode").strip().lower() or "unknown" for r in rows)
    if not modes.get("quick") and any(rep.get("quick") is True for rep in reports):
        # rows without a mode column: a report that says quick still makes this no grade
        modes["quick"] = sum(rep.get("quick") is True for rep in reports)
    return Summary(len(rows), graded, [r for r in rows if _is_error(r)], late,
                   any(_late(r) is not None for r in rows), totals, max_score, modes)


# --- the plots -------------------------------------------------------------------------------------------------

def _png(fig: Figure) -> str:
    """The figure as a data: URI. No Software entry: the PNG's bytes then depend on its pixels only."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _counts(values: list[float], top: float | None) -> tuple[np.ndarray, np.ndarray, float]:
    """Bar centres, counts and width: one bar per score when the scores are whole and few, else 20 bins."""
    top = max(top or 0.0, max(values, default=0.0), 1.0)
    if top <= INTEGER_BARS and all(float(v).is_integer() for v in values):
        n = int(math.ceil(top))
        idx = np.clip(np.rint(np.asarray(values, dtype=float)), 0, n).astype(int)
        return np.arange(n + 1, dtype=float), np.bincount(idx, minlength=n + 1), 1.0
    edges = np.linspace(0.0, top, 21)
    counts, _ = np.histogram(np.clip(values, 0.0, top), bins=edges)
    return (edges[:-1] + edges[1:]) / 2, counts, float(edges[1] - edges[0])


def _bars(ax, values: list[float], top: float | None) -> None:
    """A histogram on `ax`; with one bar per score, zero is red and full marks green."""
    x, counts, width = _counts(values, top)
    colors = [BLUE] * len(x)
    if width == 1.0 and len(x) > 1:
        colors[0], colors[-1] = RED, GREEN
    ax.bar(x, counts, width=width * 0.9, color=colors)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
    ax.set_xlim(x[0] - width / 2 - 0.3, x[-1] + width / 2 + 0.3)


def overall_plot(totals: list[float], top: float | None) -> str:
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8.0, 2.8))
        ax = fig.add_subplot()
        _bars(ax, totals, top)
        mean, median = statistics.fmean(totals), statistics.median(totals)
        ax.axvline(mean, color=GREY, linestyle="--", linewidth=1.2, label=f"mean {_fmt(mean)}")
        ax.axvline(median, color="#e67e22", linestyle=":", linewidth=1.6, label=f"median {_fmt(median)}")
        ax.legend(frameon=False, loc="upper left")
        ax.set_xlabel(f"total score (out of {_fmt(top)})" if top else "total score")
        ax.set_ylabel("students")
        fig.tight_layout()
        return _png(fig)


def piece_plot(pieces: list[str], scores: dict[str, list[float]], tops: dict[str, float | None]) -> str:
    """Small multiples, one histogram per piece in the order given, each titled with its mean and full marks."""
    ncols = min(3, len(pieces))
    nrows = math.ceil(len(pieces) / ncols)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(3.2 * ncols, 2.25 * nrows))
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, name in zip(axes, pieces):
            values, top = scores[name], tops[name]
            if not values:
                ax.set_title(f"{name}: no scores")
                ax.set_axis_off()
                continue
            _bars(ax, values, top)
            full = sum(v >= top for v in values) / len(values) if top else 0.0
            ax.set_title(f"{name}: mean {_fmt(statistics.fmean(values))}/{_fmt(top)}, {full:.0%} full")
        for ax in axes[len(pieces):]:
            ax.set_axis_off()
        fig.tight_layout()
        return _png(fig)


# --- the page --------------------------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;max-width:1100px;margin:1.5em auto;
padding:0 1em}
h1{margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ddd;border-radius:6px;padding:.4em .8em;
min-width:7.5em}.card b{display:block;font-size:1.5em}.card span{color:#666;font-size:.85em}
.banner{background:#fdecea;border:2px solid #c0392b;color:#7b1d13;padding:.7em 1em;border-radius:6px;
font-size:1.1em;margin:1em 0}.note{color:#555}.warn{color:#9a5b00}
table{border-collapse:collapse;width:100%;margin:.5em 0}th,td{border-bottom:1px solid #eee;padding:.25em .5em;
text-align:left;vertical-align:top}th{background:#f6f6f6}td.n{text-align:right;white-space:nowrap}
code{font-size:.92em;word-break:break-all}ul.hints{margin:0;padding-left:1.1em}img{max-width:100%}
nav a{margin-right:.9em}
""".strip()


def _table(head: list[str], body: list[list[str]], numeric: Collection[int] = ()) -> str:
    """A table of cells that are already HTML; the columns in `numeric` are right-aligned."""
    th = "".join(f"<th>{h}</th>" for h in head)
    trs = ["<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                            for i, c in enumerate(row)) + "</tr>" for row in body]
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(trs)}</tbody></table>"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{value}</b><span>{label}</span></div>'


def _mode_text(s: Summary) -> str:
    if len(s.modes) == 1:
        return _e(next(iter(s.modes)))
    return "mixed: " + ", ".join(f"{n} {_e(m)}" for m, n in sorted(s.modes.items()))


def headline(s: Summary) -> str:
    out = []
    if s.quick:
        out.append(f'<div class="banner"><b>QUICK RUN: THIS IS NOT A GRADE.</b> {s.quick} of {s.students} '
                   "row(s) come from <code>grade batch --quick</code>, which leaves the training cases out, so "
                   "their totals are not the grade. Regrade without <code>--quick</code> before publishing any "
                   "score.</div>")
    top = s.max_score
    pct = (lambda x: f" ({x / top:.0%})" if top else "")
    mean = statistics.fmean(s.totals) if s.totals else None
    median = statistics.median(s.totals) if s.totals else None
    cards = [_card(str(s.students), "students"), _card(str(len(s.graded)), "graded"),
             _card(str(len(s.errors)), "ungraded (error)"),
             _card(str(len(s.late)), "late") if s.has_deadline else _card("–", "late: no deadline data"),
             _card(_fmt(mean) + (pct(mean) if mean is not None else ""), "mean total"),
             _card(_fmt(median) + (pct(median) if median is not None else ""), "median total"),
             _card(_fmt(max(s.totals, default=None)), "highest total"),
             _card(_fmt(top), "max score"), _card(_mode_text(s), "mode")]
    out.append(f'<div class="cards">{"".join(cards)}</div>')
    if s.errors:
        out.append('<p class="note">Mean, median and the plots are over the graded students only; an ungraded '
                   "row's zero is no score.</p>")
    return "\n".join(out)


def distributions(s: Summary, pieces: list[str], reports: list[dict]) -> str:
    if not s.totals:
        return "<p>No graded student: nothing to plot.</p>"
    out = [f'<img alt="histogram of the total scores" src="{overall_plot(s.totals, s.max_score)}">']
    if not pieces:
        return out[0]
    from_reports = _piece_max(reports)
    scores = {p: [v for r in s.graded if (v := _num(r.get(p))) is not None] for p in pieces}
    tops = {p: from_reports.get(p) or max(scores[p], default=None) for p in pieces}
    out.append(f'<img alt="histogram of each piece\'s scores" src="{piece_plot(pieces, scores, tops)}">')
    out.append('<p class="note">Each piece\'s students by score: red is zero, green full marks.</p>')
    body = []
    for p in pieces:
        v, top = scores[p], tops[p]
        full = f"{sum(x >= top for x in v) / len(v):.0%}" if v and top else "–"
        zero = f"{sum(x <= 0 for x in v) / len(v):.0%}" if v else "–"
        body.append([_e(p), _fmt(top), _fmt(statistics.fmean(v) if v else None),
                     _fmt(statistics.median(v) if v else None), full, zero])
    out.append(_table(["piece", "max", "mean", "median", "full marks", "zero"], body, numeric={1, 2, 3, 4, 5}))
    return "\n".join(out)


def failing(cases: list[Failing], graded: int) -> str:
    if not cases:
        return "<p>No case failed for any graded student with a report.</p>"
    body = []
    for i, f in enumerate(cases, 1):
        hints = "".join(f"<li>{n}× {_e(text) if text else '<i>(no message)</i>'}"
                        + (f' <span class="note">({k} wordings differing in numbers)</span>' if k > 1 else "")
                        + "</li>" for n, text, k in f.top_hints())
        body.append([str(i), _e(f.piece), f"{_e(case_title(f.name))}<br><code>{_e(f.name)}</code>",
                     f"{f.failed} of {f.ran} ({f.failed / f.ran:.0%})", _fmt(f.lost),
                     f'<ul class="hints">{hints}</ul>'])
    return (f'<p class="note">Over the {graded} graded student(s) whose report could be read; a skipped case '
            "is not counted. Hints that differ only in their numbers are counted together.</p>"
            + _table(["#", "piece", "case", "failed", "points lost", "most common hints"], body, numeric={0, 3, 4}))


def late_section(s: Summary) -> str:
    if not s.has_deadline:
        return "<p>No deadline information: the gradebook has no <code>late</code> column.</p>"
    if not s.late:
        return "<p>No repository has commits after the graded one.</p>"
    body = [[_e(_student(r)), str(_late(r)), f"<code>{_e(_text(r, 'commit')[:12])}</code>", _e(_text(r, "committed")),
             f"<code>{_e(_text(r, 'path'), 500)}</code>"] for r in s.late]
    return ("<p>These rows were graded at the deadline; the repository has later commits that were not graded.</p>"
            + _table(["student", "later commits", "graded commit", "committed", "path"], body, numeric={1}))


def error_section(s: Summary) -> str:
    if not s.errors:
        return "<p>Every submission was graded.</p>"
    reasons = Counter(_NUMBER.sub("#", safe(re.sub(r"^\s*error:?\s*", "", _text(r, "status")), 300)) for r in s.errors)
    common = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    out = []
    if len(s.errors) > 3:
        out.append("<p>Most common reasons:</p><ul>" + "".join(f"<li>{n}× {_e(t)}</li>" for t, n in common) + "</ul>")
    body = [[_e(_student(r)), _e(re.sub(r"^\s*error:?\s*", "", _text(r, "status"))),
             f"<code>{_e(_text(r, 'path'), 500)}</code>"] for r in _by_name(s.errors)]
    out.append(_table(["student", "why", "path"], body))
    return "\n".join(out)


def release_section(rows: list[dict]) -> str:
    """The repositories whose release files differ (release_files.column's "CHANGED: ..."; any cell that is not
    one of its benign values is shown too), and what was not checked."""
    cells = {id(r): _text(r, "release_files").strip() for r in rows}
    benign = ("", "unchanged")
    flagged = [r for r in rows if cells[id(r)] not in benign
               and not cells[id(r)].startswith(("n/a", "not checked"))]
    unchecked = [r for r in rows if cells[id(r)].startswith("not checked")
                 and cells[id(r)] != "not checked (no --release)"]
    not_repos = sum(cells[id(r)].startswith("n/a") for r in rows)
    no_release = sum(cells[id(r)] == "not checked (no --release)" for r in rows)
    out = []
    if rows and no_release == len(rows):
        return "<p>Not checked: the batch ran without <code>--release</code>.</p>"
    if flagged:
        out.append("<p>A Classroom score of these repositories came from a workflow, grader or data the student "
                   "changed; the regrade's score did not.</p>")
        out.append(_table(["student", "changed", "path"], [
            [_e(_student(r)), _e(re.sub(r"^CHANGED:\s*", "", cells[id(r)]), 1000),
             f"<code>{_e(_text(r, 'path'), 500)}</code>"] for r in _by_name(flagged)]))
    else:
        out.append("<p>No repository changed its release files.</p>")
    if unchecked:
        out.append("<p>Could not be checked:</p>" + _table(["student", "why"], [
            [_e(_student(r)), _e(cells[id(r)])] for r in _by_name(unchecked)]))
    if not_repos or no_release:
        out.append(f'<p class="note">{not_repos + no_release} submission(s) were no repository or not checked '
                   "(a .zip or notebook hand-in, or a shard run without --release).</p>")
    return "\n".join(out)


def similarity_section(pairs: list[dict] | None, note: str) -> str:
    if pairs is None:
        return f'<p class="warn"><b>The similarity report was not built</b>: {_e(note or "no reason given", 500)}</p>'
    good = [p for p in pairs if isinstance(p, dict)]
    if not good:
        return "<p>No pair of submissions is similar enough to list." + (f" {_e(note, 500)}" if note else "") + "</p>"
    body = []
    for i, p in enumerate(good[:MAX_PAIRS], 1):
        parts = p.get("pieces") if isinstance(p.get("pieces"), dict) else {}
        shown = sorted(((str(k), v) for k, x in parts.items() if (v := _num(x)) is not None),
                       key=lambda kv: (-kv[1], kv[0]))
        body.append([str(i), _e(p.get("a")), _e(p.get("b")), _fmt(_num(p.get("score")), 2),
                     _e(", ".join(f"{k} {v:.2f}" for k, v in shown), 600)])
    more = (f'<p class="note">and {len(good) - MAX_PAIRS} more in the similarity report.</p>'
            if len(good) > MAX_PAIRS else "")
    lead = f'<p class="note">{_e(note, 500)}</p>' if note else ""
    return lead + _table(["#", "a", "b", "score", "by file"], body, numeric={0, 3}) + more


def skipped_section(skipped: list[tuple[str, str]]) -> str:
    if not skipped:
        return ""
    items = "".join(f"<li>{_e(name)}: {_e(why)}</li>" for name, why in skipped[:MAX_NOTES])
    more = f"<li>and {len(skipped) - MAX_NOTES} more</li>" if len(skipped) > MAX_NOTES else ""
    return (f'<h2 id="skipped">Reports not read ({len(skipped)})</h2><p class="note">These graded students count in '
            f"the headline and the plots but not in the failing cases.</p><ul>{items}{more}</ul>")


def write(out: Path, *, rows: list[dict], reports: Path, pieces: list[str], pairs: list[dict] | None,
          similarity_note: str = "", title: str = "Class report") -> Path:
    """Write the class report for the gradebook `rows` (and the students' JSON reports in `reports`) to `out`,
    atomically, and return `out`."""
    rows = [r for r in rows if isinstance(r, dict)]
    pieces = list(pieces)
    read: list[dict] = []
    skipped: list[tuple[str, str]] = []
    for row in _by_name([r for r in rows if not _is_error(r)]):  # an error row's report holds no cases
        report, why = _read_report(Path(reports) if reports else None, _student(row))
        if report is None:
            skipped.append((_student(row), why))
        else:
            read.append(report)
    s = summarize(rows, read)
    sections = [
        ("headline", "Headline", headline(s)),
        ("scores", "Scores", distributions(s, pieces, read)),
        ("failing", "What the class fails most", failing(failing_cases(read, pieces), len(read))),
        ("late", f"Late repositories ({len(s.late)})", late_section(s)),
        ("ungraded", f"Ungraded ({len(s.errors)})", error_section(s)),
        ("release", "Changed release files", release_section(rows)),
        ("similarity", "Similar submissions", similarity_section(pairs, similarity_note)),
    ]
    nav = "".join(f'<a href="#{key}">{html.escape(name)}</a>' for key, name, _ in sections[1:])
    body = "\n".join(f'<h2 id="{key}">{html.escape(name)}</h2>\n{text}' for key, name, text in sections[1:])
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n"
            f"<h1>{_e(title)}</h1><nav>{nav}</nav>\n{sections[0][2]}\n{body}\n{skipped_section(skipped)}\n"
            "</body></html>\n")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if os.path.lexists(tmp):  # a leftover (or a planted link) is replaced, never written through
        os.unlink(tmp)
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)  # replaces a link at `out` itself, never the file it points to
    return out
