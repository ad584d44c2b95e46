"""The trusted evaluator (grader/lab/evaluate.py): the grader's accuracy by length, never the student's."""
from __future__ import annotations

import pytest

from grader.lab import evaluate
from grader.lab import toy
from grader.lab.baseline import Seq2SeqBaseline


def test_the_trusted_evaluator_runs_the_baseline_unchanged():
    model = Seq2SeqBaseline(len(toy.SRC_ITOS), len(toy.TGT_ITOS))
    acc = evaluate.accuracy_by_length(model, toy.read_split("valid")[:45])
    assert sorted(acc) == list(range(1, 41)) and all(0.0 <= a <= 1.0 for a in acc.values())


def test_the_trusted_evaluator_refuses_predictions_that_count_one_guess_against_many_answers():
    model = Seq2SeqBaseline(len(toy.SRC_ITOS), len(toy.TGT_ITOS))
    step = model.decoder.forward_step

    def broadcast(y_prev, *rest):  # (B, 1, 1, V) logits: pred.eq(gold) would compare every guess with every token
        logits, state, alpha = step(y_prev.reshape(y_prev.size(0), 1), *rest)
        return logits[:, None, None], state, alpha

    model.decoder.forward_step = broadcast
    with pytest.raises(ValueError, match="the predictions have the wrong shape"):
        evaluate.accuracy_by_length(model, toy.read_split("valid")[5:6])
