"""The lesson notebook's training times are the record's (grader/core/measured.json, `bench/record.py --notebook`),
quoted with the machine and date they were measured on, never typed into its prose (issue 49: "a minute or a few"
took six)."""
from __future__ import annotations

import re

from grader import ROOT
from grader.core import measured
from grader.lesson import cells

TIMED = {"train.md": "notebook_bahdanau", "luong-train.md": "notebook_luong"}


def prose() -> dict[str, str]:
    return {cell_id: text for cell_id, kind, text in cells.cells() if kind == "md"}


def test_the_notebooks_training_cells_quote_the_recorded_times_and_where_they_were_measured():
    text = prose()
    for entry, name in TIMED.items():
        e = measured.record()[name]
        said = text[cells.cell_id(entry)]
        assert measured.seconds(name) and f"took {measured.seconds(name)} for {e['steps']:,} steps on {e['machine']}" in said
        assert e["date"] in said and "{measured:" not in said


def test_the_lesson_templates_type_no_time_of_their_own():
    folder = ROOT / "grader" / "templates" / "lesson"
    for entry in TIMED:
        template = (folder / entry).read_text(encoding="utf-8")
        assert f"{{measured:{TIMED[entry]}}}" in template
        assert not re.search(r"\b(a|\d+(\.\d+)?) (s|seconds?|minutes?)\b", template), entry


def test_without_a_recorded_time_the_prose_gives_no_figure(monkeypatch):
    monkeypatch.setattr(measured, "record", lambda: {})
    text = prose()
    for entry in TIMED:
        said = text[cells.cell_id(entry)]
        assert "{measured:" not in said and "took" not in said
