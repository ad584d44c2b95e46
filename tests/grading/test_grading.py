"""End to end: the reference earns full marks, fresh stubs earn none, the lesson's listing passes."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import ROOT
from grader.cli import cli
from grader.core.pieces import PIECES
from grader.runner.results import Limits

from helpers import grade_dict, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

FULL = Limits(case_timeout=300, piece_timeout=1500, memory_gb=6, quick=False)
LESSON = Path(__file__).parent / "lesson_listing"


def test_the_reference_scores_full_marks_training_included(lab):
    report = grade_dict(lab(), list(PIECES), FULL, lanes=True)  # the training piece beside the others, as `grade` runs
    assert report["score"] == report["max_score"] > 0, scores(report)
    assert [p["name"] for p in report["pieces"]] == list(PIECES)


def test_a_model_without_the_lab_attribute_names_fails_its_unit_cases_with_a_hint_and_is_not_trained(lab):
    sub = lab(edits={"decoder": [("self.attn = BahdanauAttention(hidden_dim)", "self.attend = BahdanauAttention(hidden_dim)"),
                                 ("context, alpha = self.attn(", "context, alpha = self.attend(")]})
    report = grade_dict(sub, ["decoder"], FULL)
    cases = {c["name"]: c for p in report["pieces"] for c in p["cases"]}
    step = cases["test_a_step_matches_the_reference_on_random_weights"]
    assert not step["passed"] and "keep the constructor as given" in step["message"]
    trained = cases["test_trained_by_the_grader_it_translates_length_30_sentences"]
    assert not trained["passed"] and trained["message"].startswith("not run:")
    assert "a step matches the reference on random weights" in trained["message"]
    assert report["pieces"][0]["seconds"] < 60  # nothing trained


def test_fresh_stubs_score_zero_with_one_clear_message_per_piece():
    result = CliRunner().invoke(cli, ["--submission", str(ROOT / "exercises"), "--quick"])
    assert result.exit_code == 1
    out = result.output
    assert "Traceback" not in out
    for piece in PIECES:
        line = next(ln for ln in out.splitlines() if ln.split()[1:2] == [piece])
        assert "  0/" in line
        assert out.count(f"not implemented yet (piece '{piece}'") == 1, piece


def test_the_lessons_listing_scores_full_marks_on_the_pieces_it_covers(lab):
    sub = lab()
    for path in LESSON.glob("*.py"):
        shutil.copyfile(path, sub / path.name)
    covered = ["encoder", "additive", "context", "luong", "decoder"]
    report = grade_dict(sub, covered, FULL)
    assert report["score"] == report["max_score"], scores(report)


@pytest.mark.parametrize("seed", ["0", "1234"])
def test_the_same_submission_scores_the_same_every_run(lab, seed):
    sub = lab(edits={"additive": [("masked_fill(~src_mask", "masked_fill(src_mask")]})
    first, second = grade_dict(sub, ["additive"], seed=seed), grade_dict(sub, ["additive"], seed=seed)
    strip = lambda r: [(c["name"], c["passed"], c["message"]) for p in r["pieces"] for c in p["cases"]]  # noqa: E731
    assert strip(first) == strip(second)


def test_a_luong_attention_that_cuts_the_gradient_loses_its_gradient_case_and_is_not_trained(lab):
    # its values are right, so the value cases pass; the gradient case names the cut, and the training is not run
    sub = lab(edits={"luong": [("alpha = torch.softmax(scores, dim=-1)  # (B, T_src)",
                                "alpha = torch.softmax(scores, dim=-1).detach()  # (B, T_src)")]})
    report = grade_dict(sub, ["luong"], FULL)
    failed = [c for p in report["pieces"] for c in p["cases"] if not c["passed"] and not c["skipped"]]
    assert [c["name"] for c in failed] == ["test_gradients_flow_to_the_encoder_states_and_the_query_as_in_the_reference",
                                           "test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences"]
    assert "Keep the scores, the weights and the context in the graph" in failed[0]["message"]
    assert failed[1]["message"].startswith("not run:")


def test_two_full_grades_of_the_same_submission_give_the_same_score_and_the_same_trained_accuracies(lab):
    import tempfile

    from grader.runner.schedule import grade
    from grader.runner.stage import stage
    from grader.runner.summary import as_dict

    sub = lab()
    seen = []
    for _ in range(2):
        heard: dict[str, list] = {}
        with tempfile.TemporaryDirectory(prefix="attnlab-test-") as tmp:
            runs = grade(submission=stage(sub, Path(tmp)), pieces=list(PIECES), seed="0", limits=FULL,
                         training=lambda piece, event: heard.setdefault(piece, []).append(
                             (event["step"], event.get("acc"))))
        report = as_dict(runs)
        cases = [(c["name"], c["passed"], c["points"], c["message"]) for p in report["pieces"] for c in p["cases"]]
        seen.append((cases, heard))
    assert seen[0][0] == seen[1][0]
    assert seen[0][1] == seen[1][1] and set(seen[0][1]) == {"decoder", "luong"}  # the validation accuracy, to the bit
