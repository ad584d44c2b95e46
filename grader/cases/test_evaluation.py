"""Hidden cases for the `evaluation` piece: greedy_decode and accuracy_by_length.

The model is a half-trained reference model (grader/artifacts): its accuracy sits mid-range, where
greedy and teacher-forced decoding, or counting pads, give visibly different numbers.
"""
from __future__ import annotations

import random

import pytest
import torch

from grader import artifacts, checks, evaluate, toy

pytestmark = pytest.mark.piece("evaluation")


@pytest.fixture(scope="module")
def fixed(ref):
    model = artifacts.load_eval_model(ref.decoder.Seq2SeqAttn)
    groups = toy.by_length(toy.read_split("test"))
    pairs = [p for n in (3, 7, 12, 18) for p in groups[n][:6]]
    random.Random(3).shuffle(pairs)
    return model, toy.encode(pairs)


def accuracy(sub, model, batch):
    out = checks.call(sub.accuracy_by_length, model, batch.src, batch.src_mask, batch.tgt, what="accuracy_by_length")
    if not isinstance(out, dict):
        checks.fail(f"accuracy_by_length should return a dict {{length: accuracy}}, got {type(out).__name__}")
    return out


@pytest.mark.points(2)
def test_greedy_decode_feeds_back_its_own_predictions(sub, ref, fixed):
    model, batch = fixed
    steps = batch.tgt.size(1) - 1
    out = checks.call(sub.greedy_decode, model, batch.src, batch.src_mask, batch.tgt[:, :1], steps, what="greedy_decode")
    if not isinstance(out, tuple) or len(out) != 2:
        checks.fail("greedy_decode should return (tokens, alpha)")
    tokens = checks.tensor(out[0], "tokens", (batch.src.size(0), steps), torch.long)
    checks.tensor(out[1], "alpha", (batch.src.size(0), steps, batch.src.size(1)))
    pred, alpha = evaluate.greedy(model, batch)
    if not torch.equal(tokens, pred):
        checks.fail("greedy_decode's tokens differ from greedy decoding: start from sos, and feed each step the argmax "
                    "of the previous step's logits (never the target).")
    checks.close(out[1], alpha, "alpha", "Stack the alpha of every step along dimension 1.")


@pytest.mark.points(1)
def test_it_returns_one_accuracy_per_source_length(sub, ref, fixed):
    model, batch = fixed
    out = accuracy(sub, model, batch)
    want = sorted(set(batch.src_mask.sum(1).tolist()))
    if sorted(out) != want or not all(type(k) is int for k in out):
        checks.fail(f"the keys should be the {len(want)} distinct source lengths as Python ints; count real tokens with src_mask.")
    if not all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in out.values()):
        checks.fail("every accuracy should be a Python float in [0, 1] (use .item()).")


@pytest.mark.points(5)
def test_it_matches_the_graders_evaluator(sub, ref, fixed):
    model, batch = fixed
    out = accuracy(sub, model, batch)
    want = evaluate.batch_accuracy_by_length(model, batch)
    if set(out) != set(want):
        checks.fail("the keys should be the distinct source lengths of the batch.")
    got = [float(out[k]) for k in sorted(want)]
    if all(abs(g - want[k]) < 1e-6 for g, k in zip(got, sorted(want))):
        return
    gold, real = batch.tgt[:, 1:], batch.tgt[:, 1:].ne(0)
    with torch.no_grad():
        forced = model(batch.src, batch.src_mask, batch.tgt)[0].argmax(-1)
    pred, _ = evaluate.greedy(model, batch)
    lengths = batch.src_mask.sum(1)

    def pooled(p, counted):
        return [float(((p == gold) & counted)[lengths == k].sum() / counted[lengths == k].sum()) for k in sorted(want)]

    for variant, hint in (
        (pooled(forced, real), "these are teacher-forced accuracies: at evaluation feed back the model's own argmax, not the target."),
        (pooled(pred, torch.ones_like(real)), "pad positions are being counted: score only target positions that are not pad (id 0)."),
    ):
        if all(abs(g - v) < 1e-6 for g, v in zip(got, variant)):
            checks.fail(hint)
    checks.fail("the accuracies differ from the grader's evaluator: decode tgt.size(1) - 1 steps greedily and compare "
                "with tgt[:, 1:] at non-pad positions.")
