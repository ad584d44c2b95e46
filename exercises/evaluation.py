# Student file, generated from the reference by `grade stubs`: replace each NotImplementedError.
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
    raise NotImplementedError("piece 'evaluation': write greedy_decode")


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
    raise NotImplementedError("piece 'evaluation': write accuracy_by_length")
