"""The class report's figures read right (issue 32): the mode tile, the max score, the histograms' colours and
labels, the unwritten pieces in "what the class fails most" and the per-piece table's headers."""
from __future__ import annotations

import re

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from grader.regrade import classreport_plots

from .test_classreport import build, card, error, graded, section, text

STUB = "not implemented yet (piece 'additive': write BahdanauAttention.forward)"


def batch_entry(student: str, quick: bool, fails: dict[str, str] | None = None):
    """A row as `grade batch` hands it to the class report: no mode cell (the CSV adds it), and its report
    says quick True or False."""
    row, report = graded(student, fails)
    del row["mode"]
    return row, {**report, "quick": quick}


def banner(page: str) -> str:
    start = page.index('class="banner"')
    return page[start:page.index("</div>", start)]


# --- the mode tile and the max score -----------------------------------------------------------------------------

def test_a_full_class_from_batch_rows_says_full_and_counts_every_student_once(tmp_path):
    bad_row, bad_report = error("eve", "holds none of the lab's files")
    del bad_row["mode"]
    entries = [batch_entry(f"s{i}", quick=False) for i in range(3)] + [(bad_row, bad_report)]
    page = build(tmp_path, entries)
    assert card(page, "mode") == "full"  # the error row has no report: it is from the same full run
    assert card(page, "students") == "4" and card(page, "graded") == "3" and card(page, "ungraded (error)") == "1"
    assert card(page, "max score") == "10" and card(page, "mean total") == "10 (100%)"
    assert "QUICK RUN" not in page


def test_a_quick_class_from_batch_rows_counts_each_row_once(tmp_path):
    page = build(tmp_path, [batch_entry(f"s{i}", quick=True) for i in range(3)])
    assert card(page, "mode") == "quick"  # was "mixed: 3 quick, 3 unknown"
    assert "QUICK RUN: THIS IS NOT A GRADE." in banner(page) and "3 of 3 row(s)" in banner(page)


def test_a_gradebook_mode_cell_wins_and_each_row_counts_once(tmp_path):
    entries = [graded("a", mode="quick"), graded("b", mode="full"), batch_entry("c", quick=True)]
    page = build(tmp_path, entries)
    assert card(page, "mode") == "mixed: 1 full, 2 quick"
    assert "2 of 3 row(s)" in banner(page)


def test_the_callers_mode_names_rows_nothing_else_does(tmp_path):
    row, report = error("eve", "unreadable")
    del row["mode"]
    page = build(tmp_path, [(row, report)], mode="quick")
    assert card(page, "mode") == "quick" and "1 of 1 row(s)" in banner(page)
    (tmp_path / "class.html").unlink()
    assert card(build(tmp_path, [(row, report)]), "mode") == "unknown"


def test_an_empty_class_says_no_submissions(tmp_path):
    page = build(tmp_path, [], pairs=None, similarity_note="no students")
    assert card(page, "mode") == "no submissions"
    assert card(page, "students") == "0" and card(page, "graded") == "0" and card(page, "max score") == "–"
    assert "QUICK RUN" not in page and "<img" not in page


def test_a_max_score_of_zero_is_a_value(tmp_path):
    row, report = graded("ann", max_score=0, total=0)
    page = build(tmp_path, [(row, report)])  # the report says 10: the gradebook's 0 still wins
    assert card(page, "max score") == "0"
    assert card(page, "mean total") == "0"  # no percent of nothing


# --- the histograms --------------------------------------------------------------------------------------------

def drawn(values: list[float], top: float) -> dict[str, list[tuple[float, float, float]]]:
    """The coloured bars `_bars` draws: colour -> (left, right, height) of each bar of some height."""
    fig = Figure()
    ax = fig.add_subplot()
    classreport_plots._bars(ax, values, top)
    out: dict[str, list[tuple[float, float, float]]] = {}
    for p in ax.patches:
        if p.get_height() > 0:
            out.setdefault(to_hex(p.get_facecolor()), []).append((p.get_x(), p.get_x() + p.get_width(), p.get_height()))
    return out


@pytest.mark.parametrize(("values", "top"), [
    ([0, 0.5, 7.5, 19.5, 20, 20], 20),  # 20 bins of width 1: the bin [0, 1) is not "zero"
    ([0, 3, 11, 20, 20], 20),  # one bar per score
    ([0, 0, 0.5, 36.5, 72.5, 73], 73),
    ([0, 12, 40, 73, 73], 73),
    ([0, 0.25, 2.5, 5, 5, 5], 5),
    ([1, 2, 5], 5),  # nobody at zero: nothing red
    ([0, 0, 3, 4], 5),  # nobody at full marks: nothing green
])
def test_red_and_green_bars_count_the_zero_and_full_marks_scores(values, top):
    bars = drawn(values, top)
    red, green = bars.get(classreport_plots.RED, []), bars.get(classreport_plots.GREEN, [])
    assert sum(h for _, _, h in red) == sum(v == 0 for v in values)
    assert sum(h for _, _, h in green) == sum(v >= top for v in values)
    lefts, rights = [b[0] for bs in bars.values() for b in bs], [b[1] for bs in bars.values() for b in bs]
    assert all(left == min(lefts) for left, _, _ in red)  # in the lowest bar, the one over score 0
    assert all(right == max(rights) for _, right, _ in green)  # in the highest, over full marks
    assert sum(h for b in bars.values() for _, _, h in b) == len(values)  # every student once


def test_each_small_histogram_labels_its_axes(monkeypatch):
    figures = []
    monkeypatch.setattr(classreport_plots, "_png", lambda fig: figures.append(fig) or "data:,")
    classreport_plots.piece_plot(["encoder", "additive", "context", "empty"],
                                 {"encoder": [0, 2, 4], "additive": [1.5, 4], "context": [2], "empty": []},
                                 {"encoder": 4, "additive": 4, "context": 2, "empty": None})
    shown = [ax for ax in figures[0].axes if ax.axison]
    assert len(shown) == 3
    assert all(ax.get_xlabel() == "score" and ax.get_ylabel() == "students" for ax in shown)


# --- the per-piece table -----------------------------------------------------------------------------------------

def test_every_header_is_aligned_as_its_column(tmp_path):
    page = build(tmp_path, [graded("ann"), graded("bob", {"test_mask": "mask ignored"})],
                 pairs=[{"a": "ann", "b": "bob", "score": 0.9, "pieces": {"additive": 0.9}}])
    tables = re.findall(r"<table>(.*?)</table>", page)
    assert len(tables) >= 3
    for table in tables:
        heads = re.findall(r"<th( class=\"n\")?>", table)
        first = re.search(r"<tbody><tr>(.*?)</tr>", table).group(1)
        cells = re.findall(r"<td( class=\"n\")?>", first)
        assert heads == cells, table[:200]
    scores = section(page, "scores")
    assert re.search(r"<th>piece</th><th class=\"n\">max</th>.*<th class=\"n\">zero</th>", scores)


# --- what the class fails most --------------------------------------------------------------------------------

def test_an_unwritten_piece_is_one_line_and_the_rest_are_real_failures(tmp_path):
    stub = {"test_scores": STUB, "test_mask": STUB}
    entries = [graded(f"stub{i}", stub) for i in range(3)]
    entries += [graded("ann", {"test_mask": "masked positions got weight 0.3"}), graded("bob"),
                graded("cat", {"test_mask": STUB})]  # a piece half written is no stub: its case is a failure
    failing = section(build(tmp_path, entries), "failing")
    lines = re.findall(r"<li class=\"unwritten\">(.*?)</li>", failing)
    assert len(lines) == 1
    assert re.search(r"additive.*3 of 6 students", text(lines[0]))
    rows = re.findall(r"<tr>(.*?)</tr>", failing)[1:]
    assert len(rows) == 1  # test_mask; the stubs' test_scores is no lesson to teach again
    assert "test_mask" in rows[0] and "2 of 3 (67%)" in rows[0]  # over the students who wrote the piece
    assert "1× masked positions got weight 0.3" in rows[0] and "1× not implemented yet" in rows[0]
    assert re.sub(r"<li class=\"unwritten\">.*?</li>", "", failing).count("not implemented yet") == 1  # cat's


def test_several_unwritten_pieces_each_get_their_line(tmp_path):
    enc = "not implemented yet (piece 'encoder': write Encoder.forward)"
    entries = [graded("a", {"test_shapes": enc, "test_matches": enc, "test_scores": STUB, "test_mask": STUB}),
               graded("b", {"test_shapes": enc, "test_matches": enc}), graded("c")]
    failing = text(section(build(tmp_path, entries), "failing"))
    encoder = re.search(r"encoder\s*: left unwritten by 2 of 3 students", failing)
    additive = re.search(r"additive\s*: left unwritten by 1 of 3 students", failing)
    assert encoder and additive and encoder.start() < additive.start()  # in piece order
    assert "No case failed" in failing


def test_a_class_of_error_rows_alone_names_the_runs_mode_from_the_batch(tmp_path):
    """grade batch and merge pass their run's mode: rows of errors alone (no report says quick) still read right."""
    from grader.regrade import book

    rows = []
    for name in ("eve", "fay"):
        row, _ = error(name, "holds none of the lab's files")
        del row["mode"]
        rows.append(row)
    files = book.Files.of(tmp_path / "grades.csv")
    files.reports.mkdir()
    book.class_reports(files, rows, progress=False, mode="quick")
    assert card(files.classreport.read_text(encoding="utf-8"), "mode") == "quick"
