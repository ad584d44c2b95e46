"""Public smoke checks for `decoder`: its point with the stand-in encoder and attention, then with your own files."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.alone import _standin_slot, alone, with_your_own  # noqa: F401 - fixtures
from grader.public.common import B, E, H, T, V, mask

pytestmark = pytest.mark.piece("decoder")


def check(sub) -> None:
    dec = verdicts.call(sub.new, "AttnDecoder", V, E, H, what="AttnDecoder(...)")
    out = verdicts.call(dec.part("forward_step"), torch.randint(1, V, (B, 1)), (torch.randn(B, H), torch.randn(B, H)),
                        torch.randn(B, T, H), mask(), what="AttnDecoder.forward_step")
    if not isinstance(out, tuple) or len(out) != 3:
        verdicts.fail("forward_step should return (logits, (h, c), alpha)")
    verdicts.tensor(out[0], "logits", (B, V), torch.float32)
    model = verdicts.call(sub.new, "Seq2SeqAttn", V, V + 2, E, H, what="Seq2SeqAttn(...)")
    logits, alpha = verdicts.pair(verdicts.call(model, torch.randint(1, V, (B, T)), mask(), torch.randint(1, V + 2, (B, 5)),
                                                what="Seq2SeqAttn.forward"), "the model's result (logits, alpha)")
    verdicts.tensor(logits, "logits", (B, 4, V + 2), torch.float32)
    verdicts.tensor(alpha, "alpha", (B, 4, T), torch.float32)


@pytest.mark.points(1)
def test_a_step_and_the_model_return_the_documented_shapes(alone):
    check(alone)


@pytest.mark.points(0)
def test_it_works_with_your_own_encoder_and_attention_files(with_your_own):
    with_your_own(check)
