"""Public smoke checks for `encoder`."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.public.common import B, E, H, T, V

pytestmark = pytest.mark.piece("encoder")


@pytest.mark.points(1)
def test_it_returns_every_output_and_the_final_state(sub):
    m = verdicts.call(sub.new, "EncoderAll", V, E, H, what="EncoderAll(...)")
    outputs, state = verdicts.pair(verdicts.call(m, torch.randint(1, V, (B, T)), what="EncoderAll.forward"), "the result")
    h, c = verdicts.pair(state, "(h, c)")
    verdicts.tensor(outputs, "outputs", (B, T, H), torch.float32)
    verdicts.tensor(h, "h", (1, B, H), torch.float32)
    verdicts.tensor(c, "c", (1, B, H), torch.float32)
