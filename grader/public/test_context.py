"""Public smoke checks for `context`."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.common import B, H, T

pytestmark = pytest.mark.piece("context")


@pytest.mark.points(1)
def test_it_is_the_weighted_sum_of_encoder_states(sub):
    alpha, enc = torch.softmax(torch.randn(B, T), -1), torch.randn(B, T, H)
    got = verdicts.call(sub.fn("attention_context"), alpha, enc, what="attention_context")
    verdicts.close(got, (alpha[..., None] * enc).sum(1), "context", "Weight each h_i by alpha_i and sum over positions.")
