"""Public smoke checks for `evaluation`: its point on the lab's stand-in model, decoded step by step as in the graded
cases, then on your own Seq2SeqAttn."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.alone import _standin_slot, alone, with_your_own  # noqa: F401 - fixtures
from grader.public.common import B, E, H, T, V, mask

pytestmark = pytest.mark.piece("evaluation")
LIMIT = 2**16  # elements of any tensor the student's code may hand the stand-in model


def lend(sub, model: torch.nn.Module):
    """`sub`, with the judge's stand-in model (grader/public/standin/decoder.py) answering what greedy decoding asks of
    `@model`: model.encoder(src) and model.decoder.forward_step(...), one step at a time."""

    def answer(name: str, args: list, kwargs: dict):
        for value in [*args, *kwargs.values(), *(args[1] if len(args) > 1 and isinstance(args[1], tuple) else ())]:
            if isinstance(value, torch.Tensor) and (type(value) is not torch.Tensor or value.layout != torch.strided
                                                    or value.device.type != "cpu" or value.numel() > LIMIT):
                raise ValueError("arguments must be plain dense CPU tensors of batch size")
        with torch.no_grad():
            if name == "encoder":
                return model.encoder(*args, **kwargs)
            if name == "forward_step":
                return model.decoder.forward_step(*args, **kwargs)
        raise ValueError(f"the model answers model.encoder(src) and model.decoder.forward_step(...) here, not {name}: "
                         "decode one step at a time")

    sub.callbacks = answer
    return sub


def check(sub, model) -> None:
    mk = mask()
    src = torch.randint(1, V, (B, T)).masked_fill(~mk, 0)
    tgt = torch.randint(3, V + 2, (B, 6))
    tgt[:, 0] = 1
    out = verdicts.call(sub.fn("accuracy_by_length"), model, src, mk, tgt, what="accuracy_by_length")
    if not isinstance(out, dict) or sorted(out) != sorted(set(mk.sum(1).tolist())):
        verdicts.fail("accuracy_by_length should return {source length: accuracy}, one key per distinct length")
    if not all(isinstance(v, float) and 0 <= v <= 1 for v in out.values()):
        verdicts.fail("every accuracy should be a Python float in [0, 1]")


@pytest.mark.points(1)
def test_it_returns_an_accuracy_per_source_length(alone):
    from grader.public.standin.decoder import Seq2SeqAttn

    check(lend(alone, Seq2SeqAttn(V, V + 2, E, H).eval()), alone.ref("@model"))


@pytest.mark.points(0)
def test_it_works_with_your_own_model_files(with_your_own):
    def own(sub) -> None:
        model = verdicts.call(sub.new, "Seq2SeqAttn", V, V + 2, E, H, what="Seq2SeqAttn(...)")
        check(sub, sub.ref(model.name))

    with_your_own(own)
