"""The class report (grader/regrade/classreport.py): one self-contained HTML page, from synthetic gradebook rows
and report JSONs."""
from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest

from grader.regrade import classreport

PIECES = ["encoder", "additive", "context"]
CASES = {"encoder": ["test_shapes", "test_matches"], "additive": ["test_scores", "test_mask"],
         "context": ["test_sums_to_one"]}


def case(name: str, passed: bool, message: str = "", points: int = 2, skipped: bool = False) -> dict:
    return {"name": name, "passed": passed, "points": points if passed else 0, "max_points": points,
            "skipped": skipped, "message": message, "duration": 0.01}


def graded(student: str, fails: dict[str, str] | None = None, **row) -> tuple[dict, dict]:
    """A graded student's row and report: every case passes but those in `fails` (case name -> hint)."""
    fails = fails or {}
    pieces = []
    for piece, names in CASES.items():
        cases = [case(n, n not in fails, fails.get(n, "")) for n in names]
        pieces.append({"name": piece, "score": sum(c["points"] for c in cases), "max_score": 2 * len(cases),
                       "seconds": 0.1, "cases": cases})
    report = {"score": sum(p["score"] for p in pieces), "max_score": 10, "pieces": pieces, "student": student}
    line = {"student": student, **{p["name"]: p["score"] for p in pieces}, "total": report["score"], "max_score": 10,
            "status": "ok", "mode": "full", "release_files": "unchanged", "path": f"/class/{student}", **row}
    return line, report


def error(student: str, why: str, **row) -> tuple[dict, dict]:
    line = {"student": student, **{p: 0 for p in PIECES}, "total": 0, "max_score": None, "status": f"error: {why}",
            "mode": "full", "release_files": "unchanged", "path": f"/class/{student}", **row}
    return line, {"student": student, "path": f"/class/{student}", "error": why}


def build(tmp_path: Path, entries: list[tuple[dict, dict | None]], **kw) -> str:
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    for row, report in entries:
        if report is not None and "/" not in row["student"]:  # a name that is no file name has no report
            (reports / f"{row['student']}.json").write_text(json.dumps(report))
    kw.setdefault("pairs", [])
    out = classreport.write(tmp_path / "class.html", rows=[r for r, _ in entries], reports=reports, pieces=PIECES, **kw)
    return out.read_text(encoding="utf-8")


def section(page: str, key: str) -> str:
    """The HTML of one section, from its heading to the next."""
    start = page.index(f'<h2 id="{key}">')
    nxt = page.find("<h2 ", start + 1)
    return page[start: nxt if nxt > 0 else len(page)]


def text(fragment: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))


def card(page: str, label: str) -> str:
    return re.search(rf"<b>([^<]*)</b><span>{re.escape(label)}</span>", page).group(1)


def test_the_headline_counts_are_right(tmp_path):
    entries = [graded("ann"), graded("bob", {"test_mask": "mask ignored"}),
               graded("cat", {"test_mask": "m", "test_scores": "s"}, late=2, commit="abc", committed="2024-05-01"),
               graded("dan", late=0), error("eve", "holds none of the lab's files")]
    page = build(tmp_path, entries)
    assert card(page, "students") == "5"
    assert card(page, "graded") == "4"
    assert card(page, "ungraded (error)") == "1"
    assert card(page, "late") == "1"
    assert card(page, "mean total") == "8.5 (85%)"  # (10 + 8 + 6 + 10) / 4: the error row's zero is no score
    assert card(page, "median total") == "9 (90%)"
    assert card(page, "max score") == "10"
    assert card(page, "highest total") == "10"
    assert card(page, "mode") == "full"
    assert "QUICK RUN" not in page
    assert page.count('src="data:image/png;base64,') == 2  # the overall and the per-piece plots


def test_the_most_failed_case_is_listed_first_with_its_hint(tmp_path):
    entries = [graded(f"s{i}", {"test_mask": f"masked positions got weight {i / 10}",
                                **({"test_shapes": "wrong shape"} if i < 2 else {})}) for i in range(5)]
    entries.append(graded("t", {"test_mask": "forgot the mask entirely"}))
    failing = section(build(tmp_path, entries), "failing")
    rows = re.findall(r"<tr>(.*?)</tr>", failing)[1:]  # after the header
    assert "test_mask" in rows[0] and "6 of 6 (100%)" in rows[0]
    # the five hints that differ only in their number are one hint, counted once per student
    assert re.search(r"5× masked positions got weight 0\.\d", rows[0])
    assert "5 wordings differing in numbers" in rows[0] and "1× forgot the mask entirely" in rows[0]
    assert "test_shapes" in rows[1] and "2 of 6" in rows[1] and "2× wrong shape" in rows[1]
    assert len(rows) == 2  # a case nobody failed is not listed


def test_a_script_in_a_message_or_a_status_is_escaped(tmp_path):
    evil = "<script>alert(1)</script>"
    entries = [graded("ann", {"test_mask": f"got {evil}"}), error(f"bob{evil}", f"bad {evil}"),
               graded("cat", release_files=f"CHANGED: grader/{evil}")]
    page = build(tmp_path, entries, pairs=[{"a": evil, "b": "ann", "score": 0.9, "pieces": {evil: 0.9}}],
                 title=f"Class {evil}")
    assert "<script" not in page.lower()
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing loaded from anywhere


def test_late_error_and_changed_release_files_rows_each_appear_in_their_section(tmp_path):
    entries = [graded("ann"), graded("late_lou", late=3, commit="0123456789abcdef", committed="2024-05-02T10:00:00"),
               error("broken_bo", "expected a folder, a .zip or a .ipynb"),
               graded("hacker_hal", release_files="CHANGED: .github/workflows/classroom.yml; +grader/x.py"),
               graded("nocheck_nia", release_files="not checked (Permission denied)")]
    page = build(tmp_path, entries)
    late, ungraded, release = (text(section(page, k)) for k in ("late", "ungraded", "release"))
    assert "late_lou" in late and "3" in late and "0123456789ab" in late and "0123456789abc" not in late
    assert all(n not in late for n in ("ann", "broken_bo", "hacker_hal"))
    assert "broken_bo" in ungraded and "expected a folder, a .zip or a .ipynb" in ungraded
    assert "late_lou" not in ungraded
    assert "hacker_hal" in release and ".github/workflows/classroom.yml; +grader/x.py" in release
    assert "nocheck_nia" in release and "Permission denied" in release and "ann" not in release
    assert "Late repositories (1)" in page and "Ungraded (1)" in page


def test_without_deadline_or_release_data_the_sections_say_so(tmp_path):
    entries = [graded("ann", release_files="not checked (no --release)"),
               graded("bob", release_files="not checked (no --release)")]
    page = build(tmp_path, entries)
    assert "no <code>late</code> column" in section(page, "late")
    assert "ran without <code>--release</code>" in section(page, "release")
    assert card(page, "late: no deadline data") == "–"


def test_pairs_none_says_why_the_similarity_report_is_missing(tmp_path):
    page = build(tmp_path, [graded("ann")], pairs=None, similarity_note="copydetect is not installed")
    assert "The similarity report was not built" in page
    assert "copydetect is not installed" in section(page, "similarity")
    listed = build(tmp_path, [graded("ann"), graded("bob")],
                   pairs=[{"a": "ann", "b": "bob", "score": 0.87, "pieces": {"additive": 0.95, "encoder": 0.5}}])
    row = text(section(listed, "similarity"))
    assert "ann bob 0.87 additive 0.95, encoder 0.50" in row
    assert "No pair" in build(tmp_path, [graded("ann")], pairs=[])


def test_the_same_inputs_give_identical_html(tmp_path):
    entries = [graded(f"s{i:02}", {"test_mask": f"off by {i}"} if i % 3 else {}, late=i % 2) for i in range(30)]
    entries.append(error("zed", "unreadable"))
    first = build(tmp_path, entries, pairs=[{"a": "s01", "b": "s02", "score": 0.8, "pieces": {"additive": 0.8}}])
    (tmp_path / "class.html").unlink()
    second = build(tmp_path, list(reversed(entries)),  # the gradebook's row order does not matter either
                   pairs=[{"a": "s01", "b": "s02", "score": 0.8, "pieces": {"additive": 0.8}}])
    assert first == second
    # no Software entry (matplotlib's version) in the PNGs: their bytes depend on their pixels only
    for png in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", first):
        assert b"Software" not in base64.b64decode(png) and b"Matplotlib" not in base64.b64decode(png)


def test_a_malformed_or_missing_report_does_not_break_it(tmp_path):
    entries = [graded("ann", {"test_mask": "real hint"}), graded("bad_json"), graded("no_report"),
               graded("wrong_shape"), graded("bad_cases"), graded("deep"), graded("huge"), graded("linked"),
               graded("../escape"), graded("binary")]
    page_entries = [(r, rep) if r["student"] == "ann" else (r, None) for r, rep in entries]
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "bad_json.json").write_text("{not json")
    (reports / "wrong_shape.json").write_text("[1, 2, 3]")
    (reports / "bad_cases.json").write_text(json.dumps({"pieces": [1, {"name": "encoder", "cases": [None, 5, {
        "name": "test_shapes", "passed": False, "max_points": "x", "message": {"a": 1}}]}, {"cases": "no"}]}))
    (reports / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with open(reports / "huge.json", "wb") as f:
        f.truncate(classreport.MAX_REPORT + 1)
    (reports / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(graded("linked", {"test_mask": "SECRET HINT"})[1]))
    os.symlink(secret, reports / "linked.json")
    page = build(tmp_path, page_entries)
    skipped = text(section(page, "skipped"))
    for name, why in [("bad_json", "not valid JSON"), ("no_report", "missing"),
                      ("wrong_shape", "not a graded report (no pieces)"), ("deep", "not valid JSON"),
                      ("huge", "over 4 MB"), ("linked", "a symbolic link"),
                      ("../escape", "not a plain file name"), ("binary", "not valid JSON")]:
        assert f"{name}: {why}" in skipped, name
    assert "SECRET HINT" not in page
    failing = text(section(page, "failing"))
    assert "real hint" in failing and "bad_cases" not in failing
    assert "test_shapes" in failing  # the one well-formed case of bad_cases.json still counts
    assert card(page, "graded") == "10"


@pytest.mark.parametrize("quick_rows", [1, 3])
def test_a_quick_gradebook_carries_a_not_a_grade_banner(tmp_path, quick_rows):
    entries = [graded(f"s{i}", mode="quick" if i < quick_rows else "full") for i in range(3)]
    page = build(tmp_path, entries)
    banner = page[page.index('class="banner"'):page.index("</div>", page.index('class="banner"'))]
    assert "QUICK RUN: THIS IS NOT A GRADE." in banner and f"{quick_rows} of 3" in banner
    assert page.index('class="banner"') < page.index('class="cards"')  # before any number
    assert card(page, "mode") == ("quick" if quick_rows == 3 else "mixed: 2 full, 1 quick")


def test_an_empty_class_still_renders(tmp_path):
    page = build(tmp_path, [], pairs=None, similarity_note="no students")
    assert card(page, "students") == "0" and "No graded student" in page and "<img" not in page


def test_a_link_at_the_output_is_replaced_not_written_through(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep")
    os.symlink(target, tmp_path / "class.html")
    build(tmp_path, [graded("ann")])
    assert target.read_text() == "keep" and not (tmp_path / "class.html").is_symlink()
