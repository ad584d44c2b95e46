"""Stand-in for encoder.py's `EncoderAll`: no LSTM, each position embedded and projected on its own."""
from __future__ import annotations

import torch
import torch.nn as nn


class EncoderAll(nn.Module):
    """Every position's state is tanh(W embed(token)); the final (h, c) is their mean and zeros, (1, B, H) each."""

    def __init__(self, src_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(src_vocab, embed_dim, padding_idx=0)
        self.project = nn.Linear(embed_dim, hidden_dim)

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        states = torch.tanh(self.project(self.embed(src)))  # (B, T_src, H), no recurrence
        final = states.mean(dim=1)[None]  # (1, B, H)
        return states, (final, torch.zeros_like(final))
