"""Piece `context`: the context vector as one batched weighted sum of encoder states."""
from __future__ import annotations

import torch


def attention_context(alpha: torch.Tensor, encoder_outputs: torch.Tensor) -> torch.Tensor:
    """Return c = sum_i alpha_i h_i for every sentence of the batch at once.

    Args:
        alpha: (B, T_src) attention weights, each row sums to 1.
        encoder_outputs: (B, T_src, H) encoder states h_1 .. h_T.

    Returns:
        context: (B, H). Use one batched matrix product, no Python loop over positions.
    """
    ### BEGIN SOLUTION
    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)  # (B, 1, T) @ (B, T, H) -> (B, H)
    ### END SOLUTION
