"""The published solutions notebook carries nothing of the machine that ran it (`grade release solutions`): not the
jail note, not its training times, not its Python version, not each cell's timing (grader/verbs/release.py)."""
from __future__ import annotations

import nbformat

from grader import ROOT
from grader.verbs.release import MACHINE_TIMES, strip_machine

LESSON = ROOT / "grader" / "templates" / "lesson"


def executed() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    cell = nbformat.v4.new_code_cell("train(...)")
    cell.metadata["execution"] = {"iopub.execute_input": "2026-12-06T10:00:00.1Z"}
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
        "2100 steps in 64 s; accuracy at length 30: 0.988\n"
        "Bahdanau: 31 ms per training step (forward and backward, B=32)\n"
        "(isolation: this machine lacks 1 of the jail's layers for graded code; your score is the same)\n"))]
    nb.cells = [cell]
    return nb


def test_the_solutions_lose_the_times_the_python_version_the_timings_and_the_jail_note_of_the_machine_that_ran_them():
    nb = executed()
    strip_machine(nb)
    text = nb.cells[0].outputs[0]["text"]
    assert text == ("2100 steps; accuracy at length 30: 0.988\n"
                    "Bahdanau: … ms per training step (forward and backward, B=32)\n")
    assert "version" not in nb.metadata["language_info"] and "execution" not in nb.cells[0].metadata


def test_the_lessons_cells_still_print_the_times_the_scrub_looks_for():
    printed = "".join(p.read_text() for p in LESSON.glob("*.ipy"))
    samples = {"steps in {": "1 steps in 2 s;", "ms per training step": "3 ms per training step"}
    for spelled, sample in samples.items():
        assert spelled in printed, spelled
        assert any(pattern.search(sample) for pattern, _ in MACHINE_TIMES), sample
