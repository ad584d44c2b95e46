"""Piece `evaluation`: greedy decoding and token accuracy by source length."""
from __future__ import annotations

import torch

from .decoder import Seq2SeqAttn


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqAttn, src: torch.Tensor, src_mask: torch.Tensor, sos: torch.Tensor, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode `steps` tokens, feeding back the model's own argmax (no teacher forcing).

    Args:
        src: (B, T_src) int64; src_mask: (B, T_src) bool, True at real tokens.
        sos: (B, 1) int64, the first decoder input.
        steps: how many tokens to produce.

    Returns:
        tokens: (B, steps) int64 predictions; alpha: (B, steps, T_src) attention weights.
    """
    ### BEGIN SOLUTION
    enc_outputs, (h, c) = model.encoder(src)
    state = (h.squeeze(0), c.squeeze(0))
    y_prev = sos
    tokens, alphas = [], []
    for _ in range(steps):
        logits, state, alpha = model.decoder.forward_step(y_prev, state, enc_outputs, src_mask)
        y_prev = logits.argmax(-1, keepdim=True)  # (B, 1), the model's own guess
        tokens.append(y_prev)
        alphas.append(alpha)
    return torch.cat(tokens, dim=1), torch.stack(alphas, dim=1)
    ### END SOLUTION


@torch.no_grad()
def accuracy_by_length(
    model: Seq2SeqAttn, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor
) -> dict[int, float]:
    """Greedy token accuracy for every source length present in the batch.

    Decode tgt.size(1) - 1 tokens from tgt[:, :1] with `greedy_decode`, compare them with
    tgt[:, 1:] at non-pad positions (pad id 0), and pool the tokens of all sentences that share
    a source length (correct tokens / real tokens, not a mean of per-sentence accuracies).

    Args:
        src: (B, T_src) int64; src_mask: (B, T_src) bool; tgt: (B, T_tgt) int64 starting with <sos>.

    Returns:
        {source length: accuracy in [0, 1]}, one key per distinct real source length.
    """
    ### BEGIN SOLUTION
    pred, _ = greedy_decode(model, src, src_mask, tgt[:, :1], tgt.size(1) - 1)  # (B, T_tgt - 1)
    gold = tgt[:, 1:]
    real = gold != 0  # (B, T_tgt - 1)
    correct = ((pred == gold) & real).sum(1)  # (B,)
    total = real.sum(1)
    lengths = src_mask.sum(1)  # (B,)
    return {
        int(n): (correct[lengths == n].sum() / total[lengths == n].sum()).item()
        for n in lengths.unique().tolist()
    }
    ### END SOLUTION
