"""The no-attention baseline (grader/lab/baseline.py): the model the plots draw beside the student's."""
from __future__ import annotations

import torch

from grader.lab import toy
from grader.lab.baseline import Seq2SeqBaseline


def test_the_baseline_step_returns_logits_state_and_zero_alpha_of_the_documented_shapes():
    torch.manual_seed(0)
    model = Seq2SeqBaseline(len(toy.SRC_ITOS), len(toy.TGT_ITOS), 32, 64)
    batch = toy.encode(toy.read_split("valid")[3:6])  # source lengths 4, 5, 6: pads in two rows
    outputs, (h, c) = model.encoder(batch.src)
    assert outputs.shape == (3, 6, 64) and h.shape == c.shape == (1, 3, 64)
    logits, (h1, c1), alpha = model.decoder.forward_step(batch.tgt[:, :1], (h[-1], c[-1]), outputs, batch.src_mask)
    assert logits.shape == (3, len(toy.TGT_ITOS))
    assert h1.shape == c1.shape == (3, 64)
    assert alpha.shape == (3, 6) and not alpha.any()
    logits, alpha = model(batch.src, batch.src_mask, batch.tgt)
    assert logits.shape == (3, batch.tgt.size(1) - 1, len(toy.TGT_ITOS))
    assert alpha.shape == (3, batch.tgt.size(1) - 1, 6)
