"""Hidden cases for the `evaluation` piece: greedy_decode and accuracy_by_length.

The model is a half-trained reference model (grader/artifacts): its accuracy sits mid-range, where
greedy and teacher-forced decoding, or counting pads, give visibly different numbers.
"""
from __future__ import annotations

import random

import pytest
import torch

from grader.lab import artifacts
from grader.judge import verdicts
from grader.lab import evaluate
from grader.lab import toy

pytestmark = pytest.mark.piece("evaluation")


LIMIT = 2**16  # elements of any tensor the student's code may hand the judge's model


@pytest.fixture(scope="module")
def fixed(ref):
    model = artifacts.load_eval_model(ref.decoder.Seq2SeqAttn)
    groups = toy.by_length(toy.read_split("test"))
    pairs = [p for n in (3, 7, 12, 18) for p in groups[n][:6]]
    random.Random(3).shuffle(pairs)
    batch = toy.encode(pairs)
    # cut some targets short: sentences of one source length then differ in target length, so pooling the
    # tokens and averaging per-sentence accuracies give different numbers
    tgt = batch.tgt.clone()
    for b in range(0, tgt.size(0), 3):
        keep = 2 + b % 5
        tgt[b, keep:] = 0
    return model, toy.Batch(batch.src, batch.src_mask, tgt)


def lend(sub, model, forced: toy.Batch | None = None):
    """`sub`, with the judge's model answering the questions the student's code asks of `model`: only what greedy
    decoding needs (the encoder, and one decoder step at a time). The whole model's forward is a decode run by the
    judge (teacher_forcing_ratio=0.0 makes it greedy, a prefix of one's own tokens as `tgt` too), so it is served
    only teacher-forced on rows of `forced`, the case's own batch: the mistake the accuracy case names."""

    def answer(name: str, args: list, kwargs: dict):
        plain(args, kwargs)
        with torch.no_grad():
            if name == "encoder":
                return model.encoder(*args, **kwargs)
            if name == "forward_step":
                return model.decoder.forward_step(*args, **kwargs)
            if name == "forward" and forced is not None:
                return model(*teacher_forced(forced, *args, **kwargs))
        raise ValueError(f"the model answers model.encoder(src) and model.decoder.forward_step(...) here, not {name}: "
                         "decode one step at a time")

    sub.callbacks = answer
    return sub


def plain(*values, depth: int = 4) -> None:
    """Refuse any tensor the judge's model should not touch: a subclass, a sparse or other layout (whose indices
    torch.load does not check), one off the CPU, or one larger than a batch; nesting is wire-bounded, and cut here."""
    for v in values:
        if isinstance(v, torch.Tensor):
            if (type(v) is not torch.Tensor or v.layout != torch.strided or v.is_nested or v.device.type != "cpu"
                    or v.numel() > LIMIT):
                raise ValueError("arguments must be plain dense CPU tensors of batch size")
        elif isinstance(v, (list, tuple, dict)):
            if depth == 0:
                raise ValueError("arguments are nested too deeply")
            plain(*(v.values() if isinstance(v, dict) else v), depth=depth - 1)


def teacher_forced(batch: toy.Batch, src=None, src_mask=None, tgt=None, teacher_forcing_ratio=1.0):
    """forward's arguments, when they ask for teacher forcing on rows of `batch` (whole rows, the same width)."""
    if type(teacher_forcing_ratio) not in (int, float) or teacher_forcing_ratio != 1:
        raise ValueError("the model runs forward here only teacher-forced (teacher_forcing_ratio=1.0): decode greedily "
                         "with model.encoder and model.decoder.forward_step")
    own = (batch.src, batch.src_mask, batch.tgt)
    rows = {(tuple(s.tolist()), tuple(m.tolist()), tuple(g.tolist())) for s, m, g in zip(*own)}
    given = (src, src_mask, tgt)
    if not all(type(x) is torch.Tensor and x.dim() == 2 and x.size(1) == y.size(1) and x.dtype == y.dtype
               and x.size(0) == src.size(0) for x, y in zip(given, own)) or not all(
            (tuple(s.tolist()), tuple(m.tolist()), tuple(g.tolist())) in rows for s, m, g in zip(*given)):
        raise ValueError("the model runs forward here only on the batch's own src, src_mask and tgt: decode greedily "
                         "with model.encoder and model.decoder.forward_step")
    return src, src_mask, tgt


@pytest.fixture
def model_sub(sub, fixed):
    """`sub` for greedy_decode: the judge's model answers the encoder and single decoder steps, nothing else."""
    return lend(sub, fixed[0])


@pytest.fixture
def accuracy_sub(sub, fixed):
    """`sub` for accuracy_by_length: teacher-forced forward on the case's batch too, so that mistake gets its hint."""
    return lend(sub, *fixed)


def accuracy(sub, batch):
    out = verdicts.call(sub.fn("accuracy_by_length"), sub.ref("@model"), batch.src, batch.src_mask, batch.tgt,
                      what="accuracy_by_length")
    if not isinstance(out, dict):
        verdicts.fail(f"accuracy_by_length should return a dict {{length: accuracy}}, got {type(out).__name__}")
    return out


@pytest.mark.points(2)
def test_greedy_decode_feeds_back_its_own_predictions(model_sub, ref, fixed):
    model, batch = fixed
    steps = batch.tgt.size(1) - 1
    out = verdicts.call(model_sub.fn("greedy_decode"), model_sub.ref("@model"), batch.src, batch.src_mask, batch.tgt[:, :1],
                      steps, what="greedy_decode")
    if not isinstance(out, tuple) or len(out) != 2:
        verdicts.fail("greedy_decode should return (tokens, alpha)")
    tokens = verdicts.tensor(out[0], "tokens", (batch.src.size(0), steps), torch.long)
    verdicts.tensor(out[1], "alpha", (batch.src.size(0), steps, batch.src.size(1)))
    pred, alpha = evaluate.greedy(model, batch)
    if not torch.equal(tokens, pred):
        verdicts.fail("greedy_decode's tokens differ from greedy decoding: start from sos, and feed each step the argmax "
                    "of the previous step's logits (never the target).")
    verdicts.close(out[1], alpha, "alpha", "Stack the alpha of every step along dimension 1.")


@pytest.mark.points(1)
def test_it_returns_one_accuracy_per_source_length(accuracy_sub, ref, fixed):
    model, batch = fixed
    out = accuracy(accuracy_sub, batch)
    want = sorted(set(batch.src_mask.sum(1).tolist()))
    if sorted(out) != want or not all(type(k) is int for k in out):
        verdicts.fail(f"the keys should be the {len(want)} distinct source lengths as Python ints; count real tokens with src_mask.")
    if not all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in out.values()):
        verdicts.fail("every accuracy should be a Python float in [0, 1] (use .item()).")


@pytest.mark.points(5)
@pytest.mark.title("it matches the grader's evaluator")
def test_it_matches_the_graders_evaluator(accuracy_sub, ref, fixed):
    model, batch = fixed
    out = accuracy(accuracy_sub, batch)
    want = evaluate.batch_accuracy_by_length(model, batch)
    if set(out) != set(want):
        verdicts.fail("the keys should be the distinct source lengths of the batch.")
    got = [float(out[k]) for k in sorted(want)]
    if all(abs(g - want[k]) < 1e-6 for g, k in zip(got, sorted(want))):
        return
    gold, real = batch.tgt[:, 1:], batch.tgt[:, 1:].ne(0)
    with torch.no_grad():
        forced = model(batch.src, batch.src_mask, batch.tgt)[0].argmax(-1)
    pred, _ = evaluate.greedy(model, batch)
    lengths = batch.src_mask.sum(1)

    def pooled(p, counted, gold=gold):
        return [float(((p == gold) & counted)[lengths == k].sum() / counted[lengths == k].sum()) for k in sorted(want)]

    def averaged(p, counted):
        per = ((p == gold) & counted).sum(1) / counted.sum(1).clamp(min=1)
        return [float(per[lengths == k].mean()) for k in sorted(want)]

    for variant, hint in (
        (averaged(pred, real), "these are means of per-sentence accuracies: pool the tokens of all sentences of a source "
                               "length (correct tokens / real tokens)."),
        (pooled(forced, real), "these are teacher-forced accuracies: at evaluation feed back the model's own argmax, not the target."),
        (pooled(pred, torch.ones_like(real)), "pad positions are being counted: score only target positions that are not pad (id 0)."),
        (pooled(pred, batch.tgt[:, :-1].ne(0), batch.tgt[:, :-1]),
         "these accuracies compare each prediction with the token fed in at that step (tgt[:, :-1]): the prediction "
         "at step t is for the next token, so compare with tgt[:, 1:]."),
    ):
        if all(abs(g - v) < 1e-6 for g, v in zip(got, variant)):
            verdicts.fail(hint)
    verdicts.fail("the accuracies differ from the grader's evaluator: decode tgt.size(1) - 1 steps greedily and compare "
                "with tgt[:, 1:] at non-pad positions.")
