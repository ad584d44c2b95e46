"""Fair hints (issue 31): a formula that differs from the lesson's by a scale on the scores loses its points with a
hint that names the scale, as Luong's cases name a missing sqrt(d), never one that sends the student to the score
formula they wrote right. Each row grades the piece (quick) and checks the failed case's message."""
from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path

import pytest
from helpers import grade_dict, make_submission, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

SOFTMAX = "alpha = torch.softmax(scores, dim=-1)"
MAIN = "test_it_matches_the_reference_on_random_weights"
SCALED = r"alpha looks like a softmax of scaled scores: the lesson's additive attention applies softmax to the scores"

# name: (piece, edits, the main case's hint)
ROWS = {
    "softmax temperature 2 (espnet's default)": ("additive", [(SOFTMAX, "alpha = torch.softmax(2 * scores, dim=-1)")],
                                                 SCALED),
    "scores halved": ("additive", [(SOFTMAX, "alpha = torch.softmax(scores / 2, dim=-1)")], SCALED),
    "scores over sqrt(H)": ("additive", [(SOFTMAX, "alpha = torch.softmax(scores / encoder_outputs.size(-1)**0.5, dim=-1)")],
                            SCALED),
    # any single factor, not only the three above (issue 39)
    "scores times 1.37": ("additive", [(SOFTMAX, "alpha = torch.softmax(1.37 * scores, dim=-1)")], SCALED),
    "GNMT's normalised v (v / ||v||)": ("additive", [(
        "scores = 2 * self.v(torch.sigmoid(keys + query)).squeeze(-1)",
        "scores = 2 * (torch.sigmoid(keys + query) @ (self.v.weight[0] / self.v.weight.norm()))")], SCALED),
}


@functools.cache
def graded(row: str) -> dict:
    piece, edits, _ = ROWS[row]
    with tempfile.TemporaryDirectory(prefix="attnlab-fair-") as tmp:
        return grade_dict(make_submission(Path(tmp) / "sub", {piece: edits}), [piece])


@pytest.mark.parametrize("row", list(ROWS))
def test_a_scaled_formula_loses_its_points_with_a_hint_naming_the_scale(row):
    piece, _, hint = ROWS[row]
    report = graded(row)
    got = scores(report)
    assert got[piece][0] < got[piece][1], f"{row}: kept full marks"
    cases = {c["name"]: c for p in report["pieces"] for c in p["cases"]}
    main = cases[MAIN]
    assert not main["passed"] and re.search(hint, main["message"]), main["message"]
    assert "Score with v^T tanh" not in main["message"]  # not sent to the score formula they wrote right
    assert not re.search(r"\d", main["message"])  # neither the factor nor any other number
