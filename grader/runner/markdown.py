"""The Markdown report (`grade --format markdown`; the per-push workflow's job summary): a total line, a table per
piece and a table per case with its hint, for GitHub to render.

Every text a submission can reach (a case's message may quote the student's exception) is shown inside one code
span: GitHub renders nothing there as a link, an image, HTML, an @mention or a reference. The grader's own words
are escaped with backslashes. The report keeps under GitHub's 1 MiB limit on a step's summary: cases past BUDGET
are left out, saying how many; the JSON report holds them all.
"""
from __future__ import annotations

import re

from grader.runner.summary import as_dict, jail_sentence, quick_note, safe, title

LIMIT = 1024 * 1024  # GitHub's limit on what one step writes to $GITHUB_STEP_SUMMARY
BUDGET = 768 * 1024  # this report's share of it, in UTF-8 bytes
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character (CommonMark lets each be escaped)
_TICKS = re.compile("`+")


def md(text: object, limit: int = 300) -> str:
    """The grader's own words: one line, every ASCII punctuation character backslash-escaped, so none starts a link,
    an image, emphasis, HTML or an autolink (`www\\.`, `https\\:`), and a `|` cannot end a table cell."""
    return _PUNCT.sub(r"\\\1", safe(text, limit))


def code(text: object, limit: int = 300) -> str:
    """Text a submission may have written, as one inline code span shown verbatim, or "" for none. The fence is one
    backtick longer than the longest run inside, so nothing inside closes it; a space pads each side (CommonMark
    strips one); `|` is escaped for a table cell (GitHub's table unescapes `\\|`, even in a code span)."""
    text = safe(text, limit)
    if not text.strip():
        return ""
    fence = "`" * (max(map(len, _TICKS.findall(text)), default=0) + 1)
    return f"{fence} " + text.replace("|", "\\|") + f" {fence}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _rows(piece: dict) -> list[str]:
    """The piece's rows of the case table: one per graded case, or one for all of them where every case worth
    points failed with the same message (a stub, a crash). Point-free skipped cases go to the notes."""
    cases = [c for c in piece["cases"] if not c["skipped"]]
    failed = [c for c in cases if not c["passed"]]
    name = md(piece["name"])
    worth = [c for c in cases if c["max_points"]]
    if len(worth) > 1 and failed == cases and len({c["message"] for c in failed}) == 1:
        return [f"| {name} | ❌ all {len(cases)} cases | 0/{piece['max_score']} | {code(failed[0]['message'])} |"]
    return [f"| {name} | {'✅' if c['passed'] else '❌'} {md(title(c['name']))} | {c['points']}/{c['max_points']} | "
            f"{'' if c['passed'] else code(c['message'])} |" for c in cases]


def render(report: dict, artifact: str | None = None, public: bool = False) -> str:
    """The Markdown of a JSON report (`as_dict`, or `grade --format json` read back); `artifact` names the run's
    artifact that holds the JSON report; `public` says these are the public smoke checks, not the grade."""
    pieces = report["pieces"]
    head = [f"## Attention lab: {report['score']}/{report['max_score']} points", ""]
    if public:  # a score of the public checks alone must not read as the grade
        head = [f"## Attention lab: not graded (public smoke checks: {report['score']}/{report['max_score']})", "",
                "> " + md("Public smoke checks only: the graded cases are sealed in this release and did not run "
                          "here; this is not the grade. Your instructor's graded run or regrade is."), ""]
    if report.get("quick"):
        head += ["> " + md(report.get("note") or "quick run: this is not the grade"), ""]
    head += ["| Piece | Points | Cases |", "|---|---:|---|"]
    for p in pieces:
        graded = [c for c in p["cases"] if not c["skipped"]]
        failed = sum(not c["passed"] for c in graded)
        cases = _plural(len(graded), "case")
        said = f"❌ {failed} of {cases} failed" if failed else f"✅ {cases} passed"
        head.append(f"| {md(p['name'])} | {p['score']}/{p['max_score']} | {said} |")
    head += [f"| **Total** | **{report['score']}/{report['max_score']}** | |", ""]

    notes = []
    skipped: dict[str, int] = {}
    for p in pieces:
        for c in p["cases"]:
            if c["skipped"]:
                skipped[c["message"]] = skipped.get(c["message"], 0) + 1
        if p.get("output_withheld"):
            notes.append(f"- {md(p['name'])}: {md(p['output_withheld'])}")
    notes += [f"- {_plural(n, 'point-free case')}: {code(m)}" for m, n in sorted(skipped.items())]
    gaps = sorted({safe(g, 80) for p in pieces for g in p.get("jail_missing", [])})
    if gaps:  # the words, then the layers as the worker named them (the JSON report's jail_missing)
        # this summary is the per-push grade itself: the regrade is what stands above it
        said = jail_sentence(gaps, "the one to trust is your instructor's regrade")
        notes.append(f"- {md(said[0].upper() + said[1:], 1200)} (jail layers missing: {', '.join(code(g) for g in gaps)})")
    if "seconds" in report:
        notes.append(f"- graded in {float(report['seconds']):.1f} s")
    if artifact:
        notes.append(f"- the whole report, as JSON: this run's artifact {code(artifact, 100)}")
    tail = (["", "**Notes**", ""] + notes) if notes else []

    table = ["### Cases", "", "| Piece | Case | Points | Hint |", "|---|---|---:|---|"]
    rows = [row for p in pieces for row in _rows(p)]
    used = sum(len(line.encode()) + 1 for line in head + table + tail) + 200  # 200: the line saying what is left out
    kept = []
    for row in rows:
        used += len(row.encode()) + 1
        if used > BUDGET:
            break
        kept.append(row)
    if len(kept) < len(rows):
        tail = ["", md(f"({len(rows) - len(kept)} more case rows left out to keep this summary under GitHub's "
                       "1 MiB limit; the JSON report has them all)")] + tail
    return "\n".join(head + table + kept + tail) + "\n"


def to_markdown(runs, quick: tuple[int, int] | None = None) -> str:
    """`grade --format markdown`: the report of these piece runs."""
    report = as_dict(runs)
    if quick:
        report.update(quick=True, note=quick_note(quick))
    return render(report, public=_public())


def _public() -> bool:
    try:
        from grader.runner import layout

        return layout.current().public
    except Exception:  # noqa: BLE001 - no layout, no note; the grade itself said what went wrong
        return False


def error(line: str) -> str:
    """What this format says when the grader itself could not run (report.grader_error): no points."""
    return f"## Attention lab: not graded\n\n{code(line, 600)}\n"
