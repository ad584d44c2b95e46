"""Public smoke checks for `additive`."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.common import B, H, T, attention_properties, mask

pytestmark = pytest.mark.piece("additive")


@pytest.mark.points(1)
def test_alpha_is_a_distribution_over_real_tokens(sub):
    m = verdicts.call(sub.new, "BahdanauAttention", H, what="BahdanauAttention(...)")
    enc, mk = torch.randn(B, T, H), mask()
    attention_properties(verdicts.call(m, enc, torch.randn(B, H), mk, what="BahdanauAttention.forward"), enc, mk)
