"""The plotting functions, the reference curves and `grader.plots.draw.main`."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from grader import ROOT
from grader.lab import artifacts
from grader.plots import draw
from grader.lab import toy

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 2000 and path.read_bytes()[:8] == PNG


def test_heatmap_and_length_curve_write_png_files(tmp_path):
    src, tgt = "the red car sees a dog".split(), "le voiture rouge voit un chien <eos>".split()
    alpha = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))  # (T_tgt, T_src)
    heat = draw.heatmaps([("fake", alpha, tgt, [1])], src, tmp_path / "h.png", "", caption="a note")
    curve = draw.length_curve({"a": {n: 1 - n / 50 for n in range(1, 41)}, "b": {1: 1.0, 2: 0.5}},
                               tmp_path / "c.png", "fake", mark=30)
    assert _is_png(heat) and _is_png(curve)


def test_heatmap_refuses_alpha_that_does_not_match_the_words(tmp_path):
    with pytest.raises(ValueError, match="expected \\(2, 3\\)"):
        draw.heatmaps([("fake", np.zeros((3, 2)), ["x", "y"], [])], ["a", "b", "c"], tmp_path / "h.png", "")


def test_the_reference_curves_match_their_checksum_and_cover_lengths_1_to_40():
    data = (artifacts.DIR / "curves.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == json.loads(artifacts.SUMS.read_text())["curves.json"]
    curves = artifacts.load_curves()
    assert set(curves) == {"reference", "luong", "baseline"}
    for curve in curves.values():
        assert sorted(curve) == list(range(1, 41)) and all(0.0 <= a <= 1.0 for a in curve.values())
    # attention is what keeps length 30, additive or (in Luong's decoder) scaled dot
    assert curves["reference"][30] >= 0.9 and curves["luong"][30] >= 0.9 and curves["baseline"][30] <= 0.35


def _submission(where: Path, broken: dict[str, str] | None = None) -> Path:
    where.mkdir()
    for stem in draw.LOADED + ["evaluation"]:
        (where / f"{stem}.py").write_text((ROOT / "reference" / f"{stem}.py").read_text())
    for stem, text in (broken or {}).items():
        (where / f"{stem}.py").write_text(text)
    return where


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setenv(draw.STEPS_ENV, "30")


def test_main_draws_both_plots_with_both_models_for_a_reference_submission(tmp_path, quick):
    pngs = draw.main(submission=_submission(tmp_path / "sub"), out=tmp_path / "out", timeout=240)
    assert [p.name for p in pngs] == ["heatmap.png", "length_curve.png"] and all(map(_is_png, pngs))
    record = json.loads((tmp_path / "out" / "plots.json").read_text())
    assert record["notes"] == []
    for model in ("Bahdanau", "Luong"):
        assert record[model]["steps"] == 30
        assert sorted(map(int, record[model]["accuracy_by_length"])) == list(range(1, 41))
        assert len(record[model]["predicted"]) == len(record["heatmap"]["expected"]) + 1  # and <eos>
    # the curves drawn: both of the submission's models, both references and the baseline; no folder paths
    assert record["curves"] == ["your Bahdanau model", "your Luong model", "reference Bahdanau", "reference Luong",
                                "no attention (encoder's last state only)"]


def test_heatmaps_draw_two_panels_side_by_side_wider_than_one(tmp_path):
    from PIL import Image

    src, tgt = "the red car sees a dog".split(), "le voiture rouge voit un chien <eos>".split()
    alpha = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))  # (T_tgt, T_src)
    one = draw.heatmaps([("additive", alpha, tgt, [])], src, tmp_path / "one.png", "t")
    two = draw.heatmaps([("additive", alpha, tgt, []), ("dot", alpha, tgt, [2])], src, tmp_path / "two.png", "t",
                         expected=[0, 2, 1, 3, 4, 5, None])
    assert _is_png(one) and _is_png(two)
    assert Image.open(two).size[0] > 1.6 * Image.open(one).size[0]


def test_main_uses_the_reference_decoder_when_the_submissions_has_a_syntax_error(tmp_path, quick):
    sub = _submission(tmp_path / "sub", {"decoder": "def broken(:\n"})
    pngs = draw.main(submission=sub, out=tmp_path / "out", timeout=240)
    assert all(map(_is_png, pngs))
    notes = json.loads((tmp_path / "out" / "plots.json").read_text())["notes"]
    assert len(notes) == 1 and "syntax error" in notes[0] and "reference decoder" in notes[0]


def test_main_falls_back_for_a_piece_that_still_raises_not_implemented(tmp_path, quick):
    sub = _submission(tmp_path / "sub", {"context": (ROOT / "exercises" / "context.py").read_text()})
    draw.main(submission=sub, out=tmp_path / "out", timeout=240)
    notes = json.loads((tmp_path / "out" / "plots.json").read_text())["notes"]
    assert len(notes) == 1 and "context.py is not finished" in notes[0]


def test_main_uses_the_reference_luong_when_the_submissions_still_raises_not_implemented(tmp_path, quick):
    sub = _submission(tmp_path / "sub", {"luong": (ROOT / "exercises" / "luong.py").read_text()})
    draw.main(submission=sub, out=tmp_path / "out", timeout=240)
    notes = json.loads((tmp_path / "out" / "plots.json").read_text())["notes"]
    assert len(notes) == 1 and "luong.py is not finished" in notes[0]


def test_main_reports_a_crashing_model_in_one_line(tmp_path, quick):
    broken = "def attention_context(alpha, encoder_outputs):\n    return 1 / 0\n"
    with pytest.raises(draw.PlotError) as err:
        draw.main(submission=_submission(tmp_path / "sub", {"context": broken}), out=tmp_path / "out", timeout=120)
    message = str(err.value)
    assert "ZeroDivisionError" in message and "context.py, line 2" in message and "\n" not in message


def test_main_stops_a_submission_that_hangs_at_its_timeout(tmp_path, quick):
    sub = _submission(tmp_path / "sub", {"encoder": "import time\ntime.sleep(600)\n"})
    with pytest.raises(draw.PlotError, match="ran past 3 s"):
        draw.main(submission=sub, out=tmp_path / "out", timeout=3)


def test_the_heatmap_sentence_has_about_12_distinct_words_and_two_adjective_noun_crossings():
    src, tgt = draw._pick_sentence(toy.read_split("test"))
    expected = draw._alignment(src)
    assert 10 <= len(src) <= 14 and len(set(src)) == len(src)
    assert len(expected) == len(tgt) + 1 and expected[-1] is None  # one per target word, then <eos>
    crossings = [t for t in range(len(tgt) - 1) if expected[t] == expected[t + 1] + 1]
    assert len(crossings) >= 2 and all(toy.DICTIONARY[src[expected[t]]] == tgt[t] for t in range(len(tgt)))


def test_main_refuses_a_folder_without_lab_files_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(draw.PlotError, match="holds none of encoder.py"):
        draw.main(submission=tmp_path / "empty", out=tmp_path / "out")


def _drawn(monkeypatch) -> list[dict]:
    """What the drawing functions hand to _save, measured as laid out before saving (in points from the bottom):
    the titles, the footnote (the last free text) and the lowest edge of each axes with its tick and axis labels."""
    measured = []
    save = draw._save

    def keep(fig, path):
        fig.draw_without_rendering()
        r = fig._get_renderer()
        points = 72 / fig.dpi
        measured.append({
            "figure": fig,
            "suptitle": fig._suptitle and fig._suptitle.get_window_extent(r).y0 * points,
            "titles": [ax.title.get_window_extent(r).y1 * points for ax in fig.axes if ax.get_title(loc="left")],
            "footnote": fig.texts and fig.texts[-1].get_window_extent(r).y1 * points,
            "lowest": min(ax.get_tightbbox(r).y0 for ax in fig.axes) * points,
        })
        return save(fig, path)

    monkeypatch.setattr(draw, "_save", keep)
    return measured


TWELVE = ("letter round flower window fast hat red fish cheese paints hot bridge".split(),
          "lettre fleur rond fenetre chapeau rapide poisson rouge fromage peint pont chaud <eos>".split())


def test_a_heatmaps_figure_title_stands_clear_of_the_panel_titles_and_the_footnote_below_the_axis_labels(tmp_path, monkeypatch):
    measured = _drawn(monkeypatch)
    src, tgt = TWELVE
    alpha = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))
    draw.heatmaps([("Bahdanau (additive scores), 2100 steps", alpha, tgt, [3]), ("Luong (scaled dot scores)", alpha, tgt, [])],
                   src, tmp_path / "h.png", "Where your models look while they translate (exercises/)",
                   expected=[0, 2, 1, 3, 5, 4, 7, 6, 8, 9, 11, 10, None], caption="expected: ...\norange boxes: ...\na note")
    m = measured[0]
    assert len(m["titles"]) == 2
    # the boxes include the fonts' full height, so 12 pt between them is about one blank line of the titles' size
    assert all(m["suptitle"] - top >= 12 for top in m["titles"]), "the figure title runs into the panels' titles"
    assert m["footnote"] <= m["lowest"], "the footnote runs into the x-axis labels"


def test_a_length_curves_footnote_sits_below_its_axis_label(tmp_path, monkeypatch):
    measured = _drawn(monkeypatch)
    curves = {"a": {n: 1 - n / 50 for n in range(1, 41)}, "b": {n: 0.5 for n in range(1, 41)}}
    draw.length_curve(curves, tmp_path / "c.png", "t", mark=30, caption="test split, ...\nsecond line\nthird line")
    assert measured[0]["footnote"] <= measured[0]["lowest"]


@pytest.mark.parametrize("titles", [("Where your Bahdanau model looks", ""), ("", "Where your Bahdanau model looks")])
def test_a_single_heatmap_panel_has_a_title_and_a_colour_bar(tmp_path, monkeypatch, titles):
    measured = _drawn(monkeypatch)
    src, tgt = TWELVE
    alpha = np.random.default_rng(0).dirichlet(np.ones(len(src)), size=len(tgt))
    subtitle, title = titles
    draw.heatmaps([(subtitle, alpha, tgt, [])], src, tmp_path / "one.png", title)
    fig = measured[0]["figure"]
    panel, *bars = fig.axes
    assert panel.get_title(loc="left") == "Where your Bahdanau model looks" and fig._suptitle is None
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight α"


def test_a_figure_names_what_it_draws_and_never_calls_the_reference_the_students():
    from grader.plots.draw import label

    assert label("Bahdanau", ["encoder", "context", "additive", "decoder", "luong"]) == "your Bahdanau model"
    assert label("Bahdanau", ["decoder", "context"]) == "Bahdanau (yours, with the reference's encoder, additive)"
    assert label("Luong", []) == "Luong from the reference's pieces (none of yours yet)"
    assert not label("Bahdanau", []).startswith("your")


def test_plot_files_replace_links_left_in_the_folder_instead_of_writing_through_them(tmp_path):
    from grader.plots.draw import PlotError, fresh

    victim = tmp_path / "grades.csv"
    victim.write_text("alice,73\n")
    out = tmp_path / "plots"
    out.mkdir()
    (out / "plots.json").symlink_to(victim)
    fresh(out / "plots.json").write_text("{}\n")
    assert victim.read_text() == "alice,73\n" and not (out / "plots.json").is_symlink()
    (tmp_path / "linked").symlink_to(out)
    try:
        fresh(tmp_path / "linked" / "heatmap.png")
    except PlotError as e:
        assert "symbolic link" in str(e)
    else:
        raise AssertionError("a linked plots folder was written into")
