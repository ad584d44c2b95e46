"""Turn piece runs into the report formats: a table for people and JSON for machines (grader.runner.formats says
which format is which, and what each says when the grader could not run)."""
from __future__ import annotations

import json
from collections import Counter

from grader.runner.results import CaseResult, PieceRun, Status
# the report's data and its text made safe, which every format (grader.runner.markdown too) builds on
from grader.runner.summary import as_dict, jail_note, piece_score, quick_note, safe, title, withheld_note

def total_score(runs: list[PieceRun]) -> tuple[int, int]:
    """(points earned, points possible) over all pieces."""
    scores = [piece_score(r) for r in runs]
    return sum(got for got, _ in scores), sum(top for _, top in scores)


def failures(run: PieceRun) -> list[CaseResult]:
    """The cases that failed (a skipped case has not failed)."""
    return [c for c in run.cases if not c.passed and not c.skipped]


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
        if not run.cases and run.status == Status.OK:  # a piece the public checks leave to the graded run
            lines.append("    no public check for this piece: only the graded cases check it")
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
    lines += jail_note(sorted({safe(g, 80) for r in runs for g in r.jail}))
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
    status = "error" if any(r.status != Status.OK for r in runs) else ("fail" if any(t["status"] == "fail" for t in tests) else "pass")
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


def to_markdown(runs: list[PieceRun], quick: tuple[int, int] | None = None) -> str:
    """Markdown for a GitHub job summary (grader.runner.markdown, imported on use)."""
    from grader.runner import markdown

    return markdown.to_markdown(runs, quick)


def to_markdown_error(line: str) -> str:
    from grader.runner import markdown

    return markdown.error(line)
