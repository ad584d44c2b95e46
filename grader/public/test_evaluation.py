"""Public smoke checks for `evaluation` (uses the submission's own model code)."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.common import B, E, H, T, V, mask

pytestmark = pytest.mark.piece("evaluation")


@pytest.mark.points(1)
def test_it_returns_an_accuracy_per_source_length(sub):
    model = verdicts.call(sub.new, "Seq2SeqAttn", V, V + 2, E, H, what="Seq2SeqAttn(...)")
    mk = mask()
    src = torch.randint(1, V, (B, T)).masked_fill(~mk, 0)
    tgt = torch.randint(3, V + 2, (B, 6))
    tgt[:, 0] = 1
    out = verdicts.call(sub.fn("accuracy_by_length"), sub.ref(model.name), src, mk, tgt, what="accuracy_by_length")
    if not isinstance(out, dict) or sorted(out) != sorted(set(mk.sum(1).tolist())):
        verdicts.fail("accuracy_by_length should return {source length: accuracy}, one key per distinct length")
    if not all(isinstance(v, float) and 0 <= v <= 1 for v in out.values()):
        verdicts.fail("every accuracy should be a Python float in [0, 1]")
