"""The class report: one self-contained HTML page an instructor reads in a minute after a class regrade.

It reads the gradebook rows and each graded student's JSON report and shows the headline numbers, the score
distributions (overall and per piece), the pieces left unwritten (a line each), the cases the class fails most
with the hints they gave (what to teach again), the repositories to look at (late, ungraded, changed release
files) and the similarity pairs. The page needs nothing else: the plots are PNGs drawn with matplotlib's Agg
renderer and embedded as base64, there is no script, and a Content-Security-Policy forbids loading anything.
The same inputs give byte-identical HTML.

Everything a student may have influenced (names, paths, statuses, the judge's hints, which can quote their
text) passes `report.safe` and is HTML-escaped. A report file is read without following a link, up to
MAX_REPORT bytes; one that is missing, too big or malformed is skipped and the page says so.

Three modules make it: grader/regrade/classreport_data.py reads the rows and reports and sums them up,
grader/regrade/classreport_plots.py draws the plots, and this one writes the page (`write`).
"""
from __future__ import annotations

import html
import os
import statistics
from collections import Counter
from collections.abc import Collection
from pathlib import Path

from grader.regrade.classreport_data import (  # noqa: F401 - MAX_REPORT: the name callers and tests know
    MAX_REPORT,
    NUMBER,
    Failing,
    Summary,
    by_name,
    cell_text,
    failing_cases,
    fmt,
    late_count,
    number,
    piece_max,
    read_report,
    student_of,
    summarize,
    unwritten_pieces,
)
from grader.regrade.classreport_plots import overall_plot, piece_plot
from grader.regrade.release_files import Kind, Verdict
from grader.regrade.rowstatus import reason, status_of
from grader.runner.report import safe
from grader.runner.report import title as case_title

MAX_PAIRS = 50  # similarity pairs shown (the similarity report has them all)
MAX_NOTES = 50  # skipped reports named one by one
# no script, no fetch, no form: the page shows its own inline style and data: images only
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _e(value: object, limit: int = 300) -> str:
    """Untrusted text for HTML: one printable line (report.safe drops controls and bidi overrides), escaped."""
    return html.escape(safe("" if value is None else value, limit), quote=True)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;max-width:1100px;margin:1.5em auto;
padding:0 1em}
h1{margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ddd;border-radius:6px;padding:.4em .8em;
min-width:7.5em}.card b{display:block;font-size:1.5em}.card span{color:#666;font-size:.85em}
.banner{background:#fdecea;border:2px solid #c0392b;color:#7b1d13;padding:.7em 1em;border-radius:6px;
font-size:1.1em;margin:1em 0}.note{color:#555}.warn{color:#9a5b00}
table{border-collapse:collapse;width:100%;margin:.5em 0}th,td{border-bottom:1px solid #eee;padding:.25em .5em;
text-align:left;vertical-align:top}th{background:#f6f6f6}td.n,th.n{text-align:right;white-space:nowrap}
code{font-size:.92em;word-break:break-all}ul.hints{margin:0;padding-left:1.1em}img{max-width:100%}
nav a{margin-right:.9em}
""".strip()


def _table(head: list[str], body: list[list[str]], numeric: Collection[int] = ()) -> str:
    """A table of cells that are already HTML; the columns in `numeric` are right-aligned, headers too."""
    th = "".join(f'<th class="n">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(head))
    trs = ["<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                            for i, c in enumerate(row)) + "</tr>" for row in body]
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(trs)}</tbody></table>"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{value}</b><span>{label}</span></div>'


def _mode_text(s: Summary) -> str:
    if not s.modes:
        return "no submissions"
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

    def pct(x: float) -> str:
        return f" ({x / top:.0%})" if top else ""

    mean = statistics.fmean(s.totals) if s.totals else None
    median = statistics.median(s.totals) if s.totals else None
    cards = [_card(str(s.students), "students"), _card(str(len(s.graded)), "graded"),
             _card(str(len(s.errors)), "ungraded (error)"),
             _card(str(len(s.late)), "late") if s.has_deadline else _card("–", "late: no deadline data"),
             _card(fmt(mean) + (pct(mean) if mean is not None else ""), "mean total"),
             _card(fmt(median) + (pct(median) if median is not None else ""), "median total"),
             _card(fmt(max(s.totals, default=None)), "highest total"),
             _card(fmt(top), "max score"), _card(_mode_text(s), "mode")]
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
    from_reports = piece_max(reports)
    scores = {p: [v for r in s.graded if (v := number(r.get(p))) is not None] for p in pieces}
    tops = {p: from_reports[p] if p in from_reports else max(scores[p], default=None) for p in pieces}
    out.append(f'<img alt="histogram of each piece\'s scores" src="{piece_plot(pieces, scores, tops)}">')
    out.append('<p class="note">Each piece\'s students by score: red counts the zeros and green full marks, '
               "at the foot or the top of a wide bar that holds other scores too.</p>")
    body = []
    for p in pieces:
        got, top = scores[p], tops[p]  # not `v`: the walrus above binds v, a number, in this function's scope
        full = f"{sum(x >= top for x in got) / len(got):.0%}" if got and top is not None else "–"
        zero = f"{sum(x <= 0 for x in got) / len(got):.0%}" if got else "–"
        body.append([_e(p), fmt(top), fmt(statistics.fmean(got) if got else None),
                     fmt(statistics.median(got) if got else None), full, zero])
    out.append(_table(["piece", "max", "mean", "median", "full marks", "zero"], body, numeric={1, 2, 3, 4, 5}))
    return "\n".join(out)


def unwritten_section(stubs: list[tuple[str, int, int]]) -> str:
    """One line per piece some students left as the stub: nothing to teach again there, so not a case each."""
    if not stubs:
        return ""
    items = "".join(f'<li class="unwritten"><b>{_e(p)}</b>: left unwritten by {n} of {ran} students '
                    f"({n / ran:.0%}): every case failed with the stub's <i>not implemented yet</i></li>"
                    for p, n, ran in stubs)
    return f"<p>Pieces left unwritten (the stub as handed out):</p><ul>{items}</ul>"


def failing(cases: list[Failing], graded: int, stubs: Collection[tuple[str, int, int]] = ()) -> str:
    lead = unwritten_section(list(stubs))
    if not cases:
        return lead + "<p>No case failed for any graded student with a report" + \
            (" who wrote its piece.</p>" if lead else ".</p>")
    body = []
    for i, f in enumerate(cases, 1):
        hints = "".join(f"<li>{n}× {_e(text) if text else '<i>(no message)</i>'}"
                        + (f' <span class="note">({k} wordings differing in numbers)</span>' if k > 1 else "")
                        + "</li>" for n, text, k in f.top_hints())
        body.append([str(i), _e(f.piece), f"{_e(case_title(f.name))}<br><code>{_e(f.name)}</code>",
                     f"{f.failed} of {f.ran} ({f.failed / f.ran:.0%})", fmt(f.lost),
                     f'<ul class="hints">{hints}</ul>'])
    return (lead + f'<p class="note">Over the {graded} graded student(s) whose report could be read; a skipped '
            "case is not counted, nor are the cases of a piece a student left unwritten. Hints that differ only "
            "in their numbers are counted together.</p>"
            + _table(["#", "piece", "case", "failed", "points lost", "most common hints"], body, numeric={0, 3, 4}))


def late_section(s: Summary) -> str:
    if not s.has_deadline:
        return "<p>No deadline information: the gradebook has no <code>late</code> column.</p>"
    if not s.late:
        return "<p>No repository has commits after the graded one.</p>"
    body = [[_e(student_of(r)), str(late_count(r)), f"<code>{_e(cell_text(r, 'commit')[:12])}</code>",
             _e(cell_text(r, "committed")),
             f"<code>{_e(cell_text(r, 'path'), 500)}</code>"] for r in s.late]
    return ("<p>These rows were graded at the deadline; the repository has later commits that were not graded.</p>"
            + _table(["student", "later commits", "graded commit", "committed", "path"], body, numeric={1}))


def error_section(s: Summary) -> str:
    if not s.errors:
        return "<p>Every submission was graded.</p>"
    reasons = Counter(NUMBER.sub("#", safe(reason(r), 300)) for r in s.errors)
    common = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    out = []
    if len(s.errors) > 3:
        out.append("<p>Most common reasons:</p><ul>" + "".join(f"<li>{n}× {_e(t)}</li>" for t, n in common) + "</ul>")
    body = [[_e(student_of(r)), _e(reason(r)),
             f"<code>{_e(cell_text(r, 'path'), 500)}</code>"] for r in by_name(s.errors)]
    out.append(_table(["student", "why", "path"], body))
    return "\n".join(out)


def release_section(rows: list[dict]) -> str:
    """The repositories whose release files differ (a CHANGED verdict: release_files.Verdict.read takes any cell
    that is not one of its benign values as one, and it is shown too), and what was not checked."""
    verdicts = {id(r): Verdict.read(r.get("release_files")) for r in rows}
    kinds = Counter(v.kind for v in verdicts.values())
    flagged = [r for r in rows if verdicts[id(r)].kind is Kind.CHANGED]
    unchecked = [r for r in rows if verdicts[id(r)].kind is Kind.NOT_CHECKED]
    not_repos, no_release = kinds[Kind.NOT_A_REPOSITORY], kinds[Kind.NO_RELEASE]
    out = []
    if rows and no_release == len(rows):
        return "<p>Not checked: the batch ran without <code>--release</code>.</p>"
    if flagged:
        out.append("<p>A Classroom score of these repositories came from a workflow, grader or data the student "
                   "changed; the regrade's score did not.</p>")
        out.append(_table(["student", "changed", "path"], [
            [_e(student_of(r)), _e(verdicts[id(r)].what, 1000),
             f"<code>{_e(cell_text(r, 'path'), 500)}</code>"] for r in by_name(flagged)]))
    else:
        out.append("<p>No repository changed its release files.</p>")
    if unchecked:
        out.append("<p>Could not be checked:</p>" + _table(["student", "why"], [
            [_e(student_of(r)), _e(verdicts[id(r)].cell)] for r in by_name(unchecked)]))
    if not_repos or no_release:
        out.append(f'<p class="note">{not_repos + no_release} submission(s) were no repository or not checked '
                   "(a .zip or notebook hand-in, or a shard run without --release).</p>")
    return "\n".join(out)


def similarity_section(pairs: list[dict] | None, note: str, found: list[str] = ()) -> str:
    """The pairs no known source explains (`pairs`), then one line for each known source's match and group of
    students (`found`: grader.regrade.similarity_findings.Findings.summary)."""
    if pairs is None:
        return f'<p class="warn"><b>The similarity report was not built</b>: {_e(note or "no reason given", 500)}</p>'
    good = [p for p in pairs if isinstance(p, dict)]
    groups = ("<p>Explained or grouped, not listed as pairs:</p><ul>" + "".join(
        f"<li>{_e(line, 600)}</li>" for line in found[:MAX_PAIRS]) + "</ul>") if found else ""
    if not good:
        return ("<p>No pair of submissions is similar enough to list." + (f" {_e(note, 500)}" if note else "")
                + "</p>" + groups)
    body = []
    for i, p in enumerate(good[:MAX_PAIRS], 1):
        parts = p.get("pieces") if isinstance(p.get("pieces"), dict) else {}
        shown = sorted(((str(k), v) for k, x in parts.items() if (v := number(x)) is not None),
                       key=lambda kv: (-kv[1], kv[0]))
        body.append([str(i), _e(p.get("a")), _e(p.get("b")), fmt(number(p.get("score")), 2),
                     _e(", ".join(f"{k} {v:.2f}" for k, v in shown), 600)])
    more = (f'<p class="note">and {len(good) - MAX_PAIRS} more in the similarity report.</p>'
            if len(good) > MAX_PAIRS else "")
    lead = f'<p class="note">{_e(note, 500)}</p>' if note else ""
    return lead + _table(["#", "a", "b", "score", "by file"], body, numeric={0, 3}) + more + groups


def skipped_section(skipped: list[tuple[str, str]]) -> str:
    if not skipped:
        return ""
    items = "".join(f"<li>{_e(name)}: {_e(why)}</li>" for name, why in skipped[:MAX_NOTES])
    more = f"<li>and {len(skipped) - MAX_NOTES} more</li>" if len(skipped) > MAX_NOTES else ""
    return (f'<h2 id="skipped">Reports not read ({len(skipped)})</h2><p class="note">These graded students count in '
            f"the headline and the plots but not in the failing cases.</p><ul>{items}{more}</ul>")


def write(out: Path, *, rows: list[dict], reports: Path, pieces: list[str], pairs: list[dict] | None,
          similarity_note: str = "", title: str = "Class report", mode: str | None = None,
          similarity_found: list[str] = ()) -> Path:
    """Write the class report for the gradebook `rows` (and the students' JSON reports in `reports`) to `out`,
    atomically, and return `out`. `mode`: the run's ("full" or "quick"), for rows that say none themselves;
    `similarity_found`: the known sources' matches and the groups of students, a line each."""
    rows = [r for r in rows if isinstance(r, dict)]
    pieces = list(pieces)
    read: dict[str, dict] = {}
    skipped: list[tuple[str, str]] = []
    for row in by_name([r for r in rows if not status_of(r).is_error]):  # an error row's report holds no cases
        report, why = read_report(Path(reports) if reports else None, student_of(row))
        if report is None:
            skipped.append((student_of(row), why))
        else:
            read[student_of(row)] = report
    s = summarize(rows, read, mode)
    graded_reports = list(read.values())
    sections = [
        ("headline", "Headline", headline(s)),
        ("scores", "Scores", distributions(s, pieces, graded_reports)),
        ("failing", "What the class fails most", failing(failing_cases(graded_reports, pieces), len(read),
                                                         unwritten_pieces(graded_reports, pieces))),
        ("late", f"Late repositories ({len(s.late)})", late_section(s)),
        ("ungraded", f"Ungraded ({len(s.errors)})", error_section(s)),
        ("release", "Changed release files", release_section(rows)),
        ("similarity", "Similar submissions", similarity_section(pairs, similarity_note, similarity_found)),
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