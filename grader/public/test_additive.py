"""Public smoke checks for `additive`: its point with the stand-in attention_context, then with your own context.py."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.alone import _standin_slot, alone, with_your_own  # noqa: F401 - fixtures
from grader.public.common import B, H, T, attention_properties, mask

pytestmark = pytest.mark.piece("additive")


def check(sub, standin: bool = False) -> None:
    m = verdicts.call(sub.new, "BahdanauAttention", H, what="BahdanauAttention(...)")
    enc, mk = torch.randn(B, T, H), mask()
    attention_properties(verdicts.call(m, enc, torch.randn(B, H), mk, what="BahdanauAttention.forward"), enc, mk, standin)


@pytest.mark.points(1)
def test_alpha_is_a_distribution_over_real_tokens(alone):
    check(alone, standin=True)


@pytest.mark.points(0)
def test_it_works_with_your_own_context_file(with_your_own):
    with_your_own(check)
