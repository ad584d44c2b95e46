"""Turn piece runs into the report formats: a table for people and JSON for machines."""
from __future__ import annotations

import functools
import json
import re
from collections import Counter

from grader.runner.results import CaseResult, PieceRun

# C0 and C1 controls (ESC sequences, 8-bit CSI), line and paragraph separators, bidirectional overrides and isolates
# (they reorder what a line shows), and the two BMP non-characters XML 1.0 forbids
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                      r"\ufffe\uffff]")
# what shows nothing (Unicode's default-ignorable code points, and the other format characters): removed, so that
# no invisible character can stand inside a command's marker, where a runner that compares text by culture
# (.NET's IndexOf) would skip it and still see the marker
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2060-\u206f"
                        "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"
                        "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
# the markers a CI runner acts on in its log: GitHub's `::command::` (at a line's start, after spaces), its
# legacy `##[command]` and Azure's `##vso[command]` (anywhere in a line: a forged annotation, or `add-mask`
# hiding the log's text). No two colons and no two hashes are left side by side.
_MARKER = re.compile(r"([:#])(?=\1)")


def safe(text: object, limit: int = 300) -> str:
    """One line of untrusted text, escaped so it can neither start a workflow command (`::`, `##[`) nor a fake
    report, and printable in every format: a lone surrogate (which no encoder writes) becomes U+FFFD, a valid
    pair its character. Every string of a submission's that any report, log or payload shows passes here."""
    text = str(text).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    text = _CONTROL.sub("?", text.replace("\r", " ").replace("\n", " ").replace("\t", " "))
    text = _MARKER.sub(r"\1 ", _INVISIBLE.sub("", text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


# what a missing jail layer leaves graded code free to do (the no-fork path of Windows and macOS lacks both):
# without seccomp its one socket back to the judge can be re-aimed (connect(AF_UNSPEC), then connect) and new
# ones opened; without Landlock every file this user may read is open to it
GAP_MEANS = {"seccomp": "reach this machine's ports and the network", "landlock": "read every file this user can"}


def title(case: str) -> str:
    """`test_it_handles_edge_sizes[B=1]` -> `it handles edge sizes [B=1]`; a case's title marker (in the manifest)
    wins, since a function name cannot hold an apostrophe ("the lesson's worked example")."""
    name, _, param = case.partition("[")
    name = _titles().get(name) or name.removeprefix("test_").replace("_", " ")
    return f"{name} [{param}" if param else name


@functools.cache
def _titles() -> dict[str, str]:
    from grader.runner.manifest import read

    try:
        return {c["case"].partition("[")[0]: c["title"] for cases in read().values() for c in cases if "title" in c}
    except (OSError, ValueError):
        return {}


def piece_score(run: PieceRun) -> tuple[int, int]:
    return sum(c.points for c in run.cases if c.passed), sum(c.points for c in run.cases)


def total_score(runs: list[PieceRun]) -> tuple[int, int]:
    """(points earned, points possible) over all pieces."""
    scores = [piece_score(r) for r in runs]
    return sum(got for got, _ in scores), sum(top for _, top in scores)


def failures(run: PieceRun) -> list[CaseResult]:
    """The cases that failed (a skipped case has not failed)."""
    return [c for c in run.cases if not c.passed and not c.skipped]


def as_dict(runs: list[PieceRun], **meta) -> dict:
    pieces = []
    for run in runs:
        got, top = piece_score(run)
        pieces.append({
            "name": run.name,
            "score": got,
            "max_score": top,
            "seconds": round(run.seconds, 2),
            "cases": [
                {"name": c.name, "passed": c.passed, "points": c.points if c.passed else 0, "max_points": c.points,
                 "skipped": c.skipped, "message": safe(c.message), "duration": round(c.duration, 3)}
                for c in run.cases
            ],
            "jail_missing": [safe(f) for f in run.jail],
            "output_withheld": withheld_note(run),
        })
    return {
        "score": sum(p["score"] for p in pieces),
        "max_score": sum(p["max_score"] for p in pieces),
        "pieces": pieces,
        **meta,
    }


def withheld_note(run: PieceRun) -> str:
    """The one line every format gives a piece whose printed output and error messages were withheld, or ""."""
    return f"your code's prints and error messages are withheld: {run.withheld}" if run.withheld else ""


def quick_note(left_out: tuple[int, int]) -> str:
    """What a quick run says in every format: which training cases it left out, and that it is no grade."""
    cases, points = left_out
    return f"quick run: {cases} training case(s) worth {points} points left out; this is not the grade"


def to_json(runs: list[PieceRun], quick: tuple[int, int] | None = None, **meta) -> str:
    if quick:
        meta.update(quick=True, note=quick_note(quick))
    return json.dumps(as_dict(runs, **meta), indent=2)


def to_text(runs: list[PieceRun], source: str, color: bool = False, quick: tuple[int, int] | None = None) -> str:
    ok, bad = ("\x1b[32m✓\x1b[0m", "\x1b[31m✗\x1b[0m") if color else ("✓", "✗")
    lines = [f"Attention lab: grading {safe(source, 500)}", ""]
    for run in runs:
        got, top = piece_score(run)
        failed = failures(run)
        lines.append(f"{ok if not failed else bad} {run.name:<11} {got:>3}/{top:<3}")
        messages = sorted({c.message for c in failed})
        own = [m for m in messages if not m.startswith("not run: ")]  # a training case waiting on the others
        todo = [m.partition(": ")[2].rstrip(")") for m in own if m.startswith("not implemented yet (piece '")]
        if failed and todo and len(todo) == len(own):  # a fresh stub: one line naming what to write
            lines.append(f"    {safe(f'not implemented yet (piece {run.name!r}: ' + ', '.join(todo) + ')', 500)}")
        elif failed and len(messages) == 1 and len(failed) == len([c for c in run.cases if c.points]):
            lines.append(f"    {safe(failed[0].message)}")  # one cause sank every case: say it once
        else:
            for c in failed:
                lines.append(f"    {bad} {title(c.name)} ({c.points} pt{'s' if c.points != 1 else ''}): {safe(c.message)}")
        if run.withheld:
            lines.append(f"    {withheld_note(run)}")
        elif run.output.strip():
            lines.append("    your code printed (last lines):")
            lines += [f"    | {safe(ln, 160)}" for ln in run.output.strip().splitlines()[-8:]]
    total, top = total_score(runs)
    skipped = Counter(safe(c.message) for r in runs for c in r.cases if c.skipped)
    lines += [""] + [f"({n} point-free case(s) {m})" for m, n in sorted(skipped.items())]
    gaps = sorted({safe(g, 80) for r in runs for g in r.jail})
    if gaps:
        means = [what for layer, what in GAP_MEANS.items() if layer in gaps]
        if means:  # what graded code can do here that the jail stops elsewhere: said, since nothing here stops it
            lines.append(f"(note: the worker jail here lacks {', '.join(gaps)}, so graded code here can")
            lines.append(f" {' and '.join(means)}; the score counts the same,")
            lines.append(" but the one to trust is a graded run on Linux (the per-push grade, Gradescope) or your instructor's regrade)")
        else:
            lines.append(f"(note: the worker jail here lacks {', '.join(gaps)}; the score counts the same,")
            lines.append(" but the one to trust is a graded run on Linux (the per-push grade, Gradescope) or your instructor's regrade)")
    lines += [f"Total: {total}/{top}" + (f" ({quick_note(quick)})" if quick else "")]
    return "\n".join(lines)


def classroom_payload(runs: list[PieceRun]) -> dict:
    """The payload classroom-resources/autograding-grading-reporter@v1 reads: one test per point.

    The reporter counts points two ways. Its Classroom annotation sums tests[].score; its log table
    scores a runner as passed tests / tests x max_score. With one test per point, each worth 1, both
    give the points earned, for every partial score. A case worth k points is k tests, all passed or
    all failed; point-free cases (the CUDA checks) are left out. Every field is built here from
    signed records, never from anything the submission printed.
    """
    tests = []
    for run in runs:
        for c in run.cases:
            for i in range(c.points):
                tests.append({
                    "name": f"{run.name}: {title(c.name)}" + (f" ({i + 1}/{c.points})" if c.points > 1 else ""),
                    "status": "pass" if c.passed else "fail",
                    "score": 1 if c.passed else 0,
                    "message": "" if c.passed else safe(c.message, 200),
                    "test_code": f"grade {run.name}",
                    "filename": f"exercises/{run.name}.py",
                    "line_no": 0,
                    "duration": int(c.duration * 1000),
                })
    status = "error" if any(r.status != "ok" for r in runs) else ("fail" if any(t["status"] == "fail" for t in tests) else "pass")
    return {"version": 1, "status": status, "max_score": len(tests), "tests": tests}


def to_classroom(runs: list[PieceRun]) -> str:
    """Base64 of classroom_payload(runs)."""
    import base64

    return base64.b64encode(json.dumps(classroom_payload(runs)).encode()).decode()


def gradescope_results(runs: list[PieceRun], quick: tuple[int, int] | None = None) -> dict:
    """Gradescope's results.json: one test per case with its own score and max_score."""
    tests = []
    for run in runs:
        for c in run.cases:
            tests.append({
                "name": f"{run.name}: {title(c.name)}",
                "score": c.points if c.passed else 0,
                "max_score": c.points,
                "status": "passed" if c.passed or c.skipped else "failed",
                "output": safe(c.message, 500) if not c.passed else "",
                "visibility": "visible",
            })
    total, top = total_score(runs)
    notes = "".join(f"\n{run.name}: {withheld_note(run)}" for run in runs if run.withheld)
    return {"score": total, "tests": tests, "visibility": "visible", "stdout_visibility": "hidden",
            "output": f"Attention lab: {total}/{top}" + (f" ({quick_note(quick)})" if quick else "") + notes}


def to_gradescope(runs: list[PieceRun], quick: tuple[int, int] | None = None) -> str:
    return json.dumps(gradescope_results(runs, quick), indent=2)


def to_junit(runs: list[PieceRun], quick: tuple[int, int] | None = None) -> str:
    """JUnit XML: a testsuite per piece, a testcase per case, points as properties."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="attention-lab")
    for run in runs:
        suite = ET.SubElement(root, "testsuite", name=run.name, tests=str(len(run.cases)),
                              failures=str(len(failures(run))),
                              skipped=str(sum(c.skipped for c in run.cases)), errors="0", time=f"{run.seconds:.3f}")
        if quick or run.withheld:
            props = ET.SubElement(suite, "properties")
            if quick:
                ET.SubElement(props, "property", name="quick", value=quick_note(quick))
            if run.withheld:
                ET.SubElement(props, "property", name="output_withheld", value=withheld_note(run))
        for c in run.cases:
            case = ET.SubElement(suite, "testcase", classname=f"attnlab.{run.name}", name=c.name, time=f"{c.duration:.3f}")
            props = ET.SubElement(case, "properties")
            ET.SubElement(props, "property", name="points", value=str(c.points if c.passed else 0))
            ET.SubElement(props, "property", name="max_points", value=str(c.points))
            if c.skipped:
                ET.SubElement(case, "skipped", message=safe(c.message))
            elif not c.passed:
                ET.SubElement(case, "failure", message=safe(c.message), type="CaseFailure").text = safe(c.message, 2000)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


GRADER_ERROR = "the grader could not run"


def grader_error(fmt: str, message: str) -> str | None:
    """What each format says when the grader's own processes failed: the cause, and no score to post.

    Gradescope gets no "score" and no "tests" (its run counts as a failed autograder, not a zero);
    Classroom and Classroom 50 get nothing (no points are posted when grade exits 2); JUnit gets one error."""
    import xml.etree.ElementTree as ET

    line = f"{GRADER_ERROR}: {safe(message, 500)}. This is not the submission's fault; no grade was recorded."
    if fmt == "json":
        return json.dumps({"error": line})
    if fmt == "gradescope":
        return json.dumps({"output": line, "visibility": "visible"}, indent=2)
    if fmt == "junit":
        root = ET.Element("testsuites", name="attention-lab")
        suite = ET.SubElement(root, "testsuite", name="grader", tests="1", failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="attnlab.grader", name="grader_starts")
        ET.SubElement(case, "error", message=line, type="GraderError").text = line
        return ET.tostring(root, encoding="unicode", xml_declaration=True)
    if fmt in ("classroom", "classroom50"):  # no file: the workflow, or Classroom 50's runner, posts no score
        return None
    if fmt == "markdown":
        return to_markdown_error(line)
    return line


def to_markdown(runs: list[PieceRun], quick: tuple[int, int] | None = None) -> str:
    """Markdown for a GitHub job summary (grader.runner.markdown, imported on use: it imports this module)."""
    from grader.runner import markdown

    return markdown.to_markdown(runs, quick)


def to_markdown_error(line: str) -> str:
    from grader.runner import markdown

    return markdown.error(line)


FORMATS = {"json": to_json, "classroom": to_classroom, "gradescope": to_gradescope, "junit": to_junit,
           "markdown": to_markdown}
