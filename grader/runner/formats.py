"""The report formats, one table: how each writes a grade and a grader error, and who reads it.

The command line's `--format` choices and help, the grade verb and its error path all read FORMATS; a new format
is one entry here (with its renderer, in grader/runner/report.py or a module of its own).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from grader.runner import report
from grader.runner.results import PieceRun


@dataclass(frozen=True)
class Format:
    """One `--format`: `render(runs, quick=..., seconds=..., source=...)` writes a grade (`quick`: the points a quick
    run left out, display.left_out; None in full); `error(line)` what the format says when the grader itself could
    not run (None: nothing is written, so no score is posted)."""

    help: str  # the command line's words for it
    render: Callable[..., str]
    error: Callable[[str], str | None]
    quick: bool = True  # whether a quick run (not a grade) may be written in it: never what a platform posts
    machine: bool = True  # read by a program: --out gets it, and the log the table for people
    refuse: Callable[[], str | None] = lambda: None  # why it cannot be written on this machine, or None


def _text(runs: list[PieceRun], *, quick=None, seconds: float = 0.0, source: str = "") -> str:
    return report.to_text(runs, source, quick=quick) + f"  ({seconds:.1f} s)"


def _json(runs: list[PieceRun], *, quick=None, seconds: float = 0.0, source: str = "") -> str:
    return report.to_json(runs, seconds=seconds, quick=quick)


def _classroom50(runs: list[PieceRun], **_) -> str:
    from grader.runner.classroom50_result import to_classroom50

    return to_classroom50(runs)


def _classroom50_refused() -> str | None:
    from grader.runner.classroom50_result import missing_identity

    gone = missing_identity()
    return (None if not gone else "--format classroom50 reads the submission's identity from Classroom 50's runner; "
            f"not set here: {', '.join(gone)}")


def _junit_error(line: str) -> str:
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="attention-lab")
    suite = ET.SubElement(root, "testsuite", name="grader", tests="1", failures="0", errors="1", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="attnlab.grader", name="grader_starts")
    ET.SubElement(case, "error", message=line, type="GraderError").text = line
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _nothing(line: str) -> None:
    """Classroom and Classroom 50: no file, so the workflow, or Classroom 50's runner, posts no score."""
    return None


FORMATS: dict[str, Format] = {
    "text": Format("a table per piece with hints", _text, lambda line: line, machine=False),
    "json": Format("score, max_score and pieces", _json, lambda line: json.dumps({"error": line})),
    "markdown": Format("a GitHub job summary", lambda runs, *, quick=None, **_: report.to_markdown(runs, quick),
                       report.to_markdown_error),
    "classroom": Format("base64 payload for the old Classroom reporter", lambda runs, **_: report.to_classroom(runs),
                        _nothing, quick=False),
    "classroom50": Format("Classroom 50's result.json (identity from its runner's environment)", _classroom50,
                          _nothing, quick=False, refuse=_classroom50_refused),
    # Gradescope gets no "score" and no "tests": its run counts as a failed autograder, not a zero
    "gradescope": Format("results.json", lambda runs, *, quick=None, **_: report.to_gradescope(runs, quick),
                         lambda line: json.dumps({"output": line, "visibility": "visible"}, indent=2)),
    "junit": Format("JUnit XML", lambda runs, *, quick=None, **_: report.to_junit(runs, quick), _junit_error),
}


def help_text() -> str:
    """The `--format` option's help: each format and what it is."""
    return "; ".join(f"{name}: {f.help}" for name, f in FORMATS.items()) + "."


def render(fmt: str, runs: list[PieceRun], *, quick=None, seconds: float = 0.0, source: str = "") -> str:
    return FORMATS[fmt].render(runs, quick=quick, seconds=seconds, source=source)


def grader_error(fmt: str, message: str) -> str | None:
    """What format `fmt` says when the grader's own processes failed: the cause, and no score to post."""
    line = (f"{report.GRADER_ERROR}: {report.safe(message, 500)}. This is not the submission's fault; "
            "no grade was recorded.")
    return FORMATS[fmt].error(line)
