"""Public smoke checks for `encoder`."""
from __future__ import annotations

import pytest
import torch

from grader import checks
from grader.public.common import B, E, H, T, V

pytestmark = pytest.mark.piece("encoder")


@pytest.mark.points(1)
def test_it_returns_every_output_and_the_final_state(sub):
    m = checks.call(sub.new, "EncoderAll", V, E, H, what="EncoderAll(...)")
    outputs, state = checks.pair(checks.call(m, torch.randint(1, V, (B, T)), what="EncoderAll.forward"), "the result")
    h, c = checks.pair(state, "(h, c)")
    checks.tensor(outputs, "outputs", (B, T, H), torch.float32)
    checks.tensor(h, "h", (1, B, H), torch.float32)
    checks.tensor(c, "c", (1, B, H), torch.float32)
