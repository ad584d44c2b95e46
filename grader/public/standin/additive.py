"""Stand-in for additive.py's `BahdanauAttention`: uniform weights over the real tokens, no scores."""
from __future__ import annotations

import torch
import torch.nn as nn

from .context import attention_context


class BahdanauAttention(nn.Module):
    """alpha is 1/n at each of a sentence's n real tokens (whatever the decoder state); the context is the stand-in's."""

    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.hidden_dim = hidden_dim

    def forward(self, encoder_outputs: torch.Tensor, decoder_state: torch.Tensor,
                src_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        real = torch.ones(encoder_outputs.shape[:2], device=encoder_outputs.device) if src_mask is None \
            else src_mask.to(encoder_outputs.dtype)
        alpha = real / real.sum(dim=1, keepdim=True)  # (B, T_src)
        pooled = attention_context(alpha, encoder_outputs)  # (B, H), the stand-in's
        return pooled, alpha
