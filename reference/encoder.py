"""Piece `encoder`: an LSTM encoder that keeps the hidden state of every source position."""
from __future__ import annotations

import torch
import torch.nn as nn


class EncoderAll(nn.Module):
    """Embed source tokens, run an LSTM and return all of its outputs plus its final state."""

    def __init__(self, src_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(src_vocab, embed_dim, padding_idx=0)
        self.rnn = nn.LSTM(embed_dim, hidden_dim, batch_first=True)

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Encode a batch of padded source sentences.

        Args:
            src: (B, T_src) int64 token ids, 0 is the pad id.

        Returns:
            outputs: (B, T_src, H), the LSTM output at every source position (attention needs
                all of them, not only the last one).
            (h, c): each (1, B, H), the LSTM's final hidden and cell state.
        """
        ### BEGIN SOLUTION
        e = self.embed(src)  # (B, T_src, E)
        outputs, (h, c) = self.rnn(e)  # (B, T_src, H); (1, B, H) each
        return outputs, (h, c)
        ### END SOLUTION
