"""Issue 32 §3: a missing jail layer is said in plain words, with whether it changes the score; the layer names
stay as the worker gives them where code reads them (the JSON report's jail_missing)."""
from __future__ import annotations

import json

from grader.runner import markdown
from grader.runner.report import to_json, to_text
from grader.runner.results import CaseResult, PieceRun
from grader.runner.summary import GAP_MEANS, JAIL_NOTE


def runs(*gaps: str) -> list[PieceRun]:
    return [PieceRun("context", [CaseResult("test_shape", 2, True, "")], jail=list(gaps))]


def words(text: str) -> str:
    """The text with its line breaks and runs of spaces made one space: the note is a wrapped paragraph."""
    return " ".join(text.split())


def test_a_missing_unprivileged_uid_is_one_short_line_for_the_student_and_plain_words_for_the_instructor():
    text = to_text(runs("unprivileged uid"), "exercises")
    said = [line for line in text.splitlines() if "jail" in line or "isolation" in line]
    assert said == ["(isolation: this machine lacks 1 of the jail's layers for graded code; your score is the same; "
                    "--format json says which)"]  # issue 39: a student cannot act on the layers
    assert len(said[0]) <= 120 and "locked-down" not in text and "lacks" not in text.replace(said[0], "")
    assert text.splitlines()[-1] == "Total: 2/2"
    report = json.loads(to_json(runs("unprivileged uid")))
    assert report["pieces"][0]["jail_missing"] == ["unprivileged uid"]
    assert words(report["jail_note"]).startswith(  # the instructor's: the sentence in words, in the JSON report
        "graded code here runs as the user that started grade (root here), not as the locked-down user nobody, "
        "because the user nobody cannot read this machine's Python installation")
    assert "this does not change your score" in report["jail_note"]
    assert json.loads(to_json(runs()))["jail_note"] == ""


def test_an_older_workers_layer_with_its_reason_reads_the_same():
    old = to_text(runs("unprivileged uid (the interpreter is not readable by nobody)"), "exercises")
    assert old == to_text(runs("unprivileged uid"), "exercises")


def test_what_a_missing_layer_lets_graded_code_do_is_still_said_and_the_layers_stay_named_in_markdown():
    text = words(json.loads(to_json(runs("seccomp", "landlock")))["jail_note"])
    assert "without seccomp's filter on the system calls it may make" in text
    assert f"so graded code here can {GAP_MEANS['seccomp']} and {GAP_MEANS['landlock']}" in text
    assert "the one to trust is a graded run on Linux (the per-push grade, Gradescope) or your instructor's regrade" in text
    assert "lacks 2 of the jail's layers" in to_text(runs("seccomp", "landlock"), "exercises")
    md = markdown.to_markdown(runs("seccomp", "unprivileged uid"))
    said = [line for line in md.splitlines() if "jail layers missing" in line]
    assert len(said) == 1 and said[0].startswith("- Graded code here runs as the user that started grade")
    assert "this does not change your score" in said[0] and "` seccomp `" in said[0] and "` unprivileged uid `" in said[0]
    assert "the per-push grade" not in said[0]  # the summary is the per-push grade: the regrade is above it


def test_the_note_can_be_taken_out_whole_and_nothing_else_with_it():
    for gaps in (("unprivileged uid",), ("seccomp", "landlock", "resource limits"), ("a layer of the future",)):
        text = to_text(runs(*gaps), "exercises")
        assert JAIL_NOTE.sub("", text) == to_text(runs(), "exercises"), gaps
