"""Stand-in for decoder.py's `Seq2SeqAttn` (the evaluation piece's model): no LSTM cell, one step at a time only."""
from __future__ import annotations

import torch
import torch.nn as nn

from .additive import BahdanauAttention
from .encoder import EncoderAll


class AttnDecoder(nn.Module):
    """A step mixes the previous token's embedding, the attention's context and the previous state through one layer."""

    def __init__(self, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=0)
        self.attn = BahdanauAttention(hidden_dim)
        self.mix = nn.Linear(embed_dim + hidden_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim, tgt_vocab)

    def forward_step(self, y_prev: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], encoder_outputs: torch.Tensor,
                     src_mask: torch.Tensor | None = None):
        """(B, 1) token, ((B, H), (B, H)) state -> (logits (B, V_tgt), the new state, alpha (B, T_src))."""
        previous, cell = state
        context, alpha = self.attn(encoder_outputs, previous, src_mask)
        token = self.embed(y_prev)[:, 0]  # (B, E)
        hidden = torch.tanh(self.mix(torch.cat((token, context), dim=1)) + previous)
        return self.out(hidden), (hidden, cell), alpha


class Seq2SeqAttn(nn.Module):
    """The stand-in encoder and decoder; it decodes only step by step (model.encoder, model.decoder.forward_step)."""

    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.encoder = EncoderAll(src_vocab, embed_dim, hidden_dim)
        self.decoder = AttnDecoder(tgt_vocab, embed_dim, hidden_dim)
        self.tgt_vocab = tgt_vocab

    def forward(self, *args, **kwargs):
        raise ValueError("the public check's stand-in model decodes one step at a time: use model.encoder(src) and "
                         "model.decoder.forward_step(...), as greedy decoding does")
