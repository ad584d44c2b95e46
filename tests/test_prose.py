"""The README's counts of pieces and points are the registry's and the manifest's (issue 39)."""
from __future__ import annotations

from grader import ROOT

from prose import disagreements, facts


def test_the_readme_counts_the_pieces_and_points_the_registry_and_manifest_hold():
    assert disagreements(ROOT) == []


def test_a_readme_that_restates_an_old_total_or_count_is_caught(tmp_path):
    for rel in ("grader/core/piece_facts.json", "grader/cases/manifest.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    _, total = facts(ROOT)
    text = (ROOT / "README.md").read_text().replace(f"set the total points to {total}.", "set the total points to 99.")
    (tmp_path / "README.md").write_text(text.replace("You write six pieces", "You write seven pieces"))
    found = disagreements(tmp_path)
    assert len(found) == 2 and any("Gradescope" in f for f in found) and any("You write" in f for f in found)


def test_the_measured_page_is_the_records_and_the_readme_restates_none_of_its_times():
    import json
    import re

    from grader.core import measured

    import importlib.util

    spec = importlib.util.spec_from_file_location("attnlab_bench_record", ROOT / "bench" / "record.py")
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)  # as tests/platforms/test_platforms.py loads bench/gpu.py
    rec = json.loads(measured.RECORD.read_text())
    assert {"grade_full", "grade_quick", "grade_training", "grade_plots", "fast_tests"} <= set(rec)
    assert all({"value", "unit", "machine", "calibration", "date", "commit"} <= set(e) for e in rec.values())
    assert (ROOT / "docs" / "measured.md").read_text() == record.page(rec)  # generated, never edited by hand
    for rel in ("README.md", "docs/maintaining.md", "grader/templates/student/README.md"):
        text = (ROOT / rel).read_text()
        for line in text.splitlines():
            if re.search(r"fast tests|grade --quick|to grade a push|A push takes|full `grade`|training cases", line):
                assert not re.search(r"\d+(\.\d+)? (s|seconds|minutes)\b", line), (rel, line)


def test_the_command_line_announces_the_recorded_times_with_where_they_were_measured():
    from click.testing import CliRunner

    from grader.core import measured
    from grader.cli import cli

    shown = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    assert f"{measured.seconds('grade_training')} of a full grade's {measured.seconds('grade_full')}" in shown
    assert measured.where("grade_full").split(",")[0] in shown
    said = (ROOT / "grader" / "verbs" / "grade.py").read_text()
    assert 'measured.seconds("grade_plots")' in said and "80 s" not in said
