"""What every report format builds on: the piece runs as data (`as_dict`, the scores, the notes every format
gives) and each line of untrusted text made safe to show (`safe`). grader.runner.report and grader.runner.markdown
both import it."""
from __future__ import annotations

import functools
import re

from grader.runner.results import PieceRun

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
# the jail layers (as grader/worker/jail.py names them, and the JSON report's jail_missing keeps them) in words a
# student can act on: the layer names alone read as a fault of theirs, or of their score
GAP_WORDS = {
    "unprivileged uid": "as the user that started grade (root here), not as the locked-down user nobody, because "
                        "the user nobody cannot read this machine's Python installation",
    "capabilities": "with root's powers, which could not be dropped",
    "landlock": "without Landlock's fence on the files it may open",
    "seccomp": "without seccomp's filter on the system calls it may make",
    "network namespace": "on this machine's network instead of cut off from it",
    "IPC namespace": "sharing this machine's inter-process channels instead of having its own",
    "process limit": "without a cap on the processes and threads it starts",
    "CPU quota": "without being held to one CPU",
    "resource limits": "without caps on its memory, CPU time and open files (the grader's own time limits still "
                       "stop it)",
}
UNCHANGED = "this does not change your score: the same cases run and count the same points"
TRUST = "the one to trust is a graded run on Linux (the per-push grade, Gradescope) or your instructor's regrade"
# the text report's one line: a student cannot act on the jail's layers, so the sentence itself goes to where an
# instructor reads (the JSON report's jail_note, the Markdown summary)
JAIL_LINE = ("(isolation: this machine lacks {n} of the jail's layers for graded code; your score is the same; "
             "--format json says which)")
# the line as jail_note writes it, for taking it out of what is published (grader/verbs/release.py)
JAIL_NOTE = re.compile(r"^\(isolation: this machine lacks \d+ of the jail's layers for graded code; [^\n]*\)(\n|$)",
                       re.MULTILINE)


def jail_sentence(gaps: list[str], trust: str = TRUST) -> str:
    """What the jail layers this machine lacks (each already made safe) leave graded code doing, in words, and that
    the score is not changed by it: "graded code here runs ..."; "" where none is missing."""
    if not gaps:
        return ""
    named = {g.partition(" (")[0]: g for g in gaps}  # an older worker's "unprivileged uid (why)" is the same layer
    known = [words for layer, words in GAP_WORDS.items() if layer in named]
    known += [f"without the jail layer {g}" for layer, g in named.items() if layer not in GAP_WORDS]
    means = [what for layer, what in GAP_MEANS.items() if layer in gaps]
    said = f"graded code here runs {'; '.join(known)}" + ("," if means else ";")
    if means:  # what graded code can do here that the jail stops elsewhere: said, since nothing here stops it
        said += f" so graded code here can {' and '.join(means)};"
    return f"{said} {UNCHANGED}, but {trust}"


def jail_note(gaps: list[str]) -> list[str]:
    """The text report's one short line on the jail layers this machine lacks; [] where none is missing."""
    named = {g.partition(" (")[0] for g in gaps}  # an older worker's "unprivileged uid (why)" is the same layer
    return [JAIL_LINE.format(n=len(named))] if named else []


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
    gaps = sorted({safe(g, 80) for run in runs for g in run.jail})
    return {
        "score": sum(p["score"] for p in pieces),
        "max_score": sum(p["max_score"] for p in pieces),
        "pieces": pieces,
        "jail_note": jail_sentence(gaps),  # what the missing layers mean, in words ("" where none is missing)
        **meta,
    }


def withheld_note(run: PieceRun) -> str:
    """The one line every format gives a piece whose printed output and error messages were withheld, or ""."""
    return f"your code's prints and error messages are withheld: {run.withheld}" if run.withheld else ""


def quick_note(left_out: tuple[int, int]) -> str:
    """What a quick run says in every format: which training cases it left out, and that it is no grade."""
    cases, points = left_out
    return f"quick run: {cases} training case(s) worth {points} points left out; this is not the grade"
