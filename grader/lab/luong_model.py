"""Luong et al. 2015's global-attention decoder, around any scoring module with LuongDotAttention's API.

Trusted scaffolding, like the no-attention baseline: the grader trains it with the student's
`LuongDotAttention` plugged in. Four things differ from the lesson's drop-in into the Bahdanau decoder
(which learns this task slowly; see docs/performance.md's Luong table):
- it attends with the *current* state h_t, after the LSTM step, not with s_{t-1};
- the query is W_a h_t: Luong's "general" score h_t^T W_a h_i, computed by the student's dot product on
  a projected query. A raw LSTM state lies in (-1, 1)^H, so its dot products with the encoder states,
  divided by sqrt(H), stay small and the weights near uniform; W_a lets them grow sharp;
- it predicts from the attentional vector h~_t = tanh(W_c [c_t; h_t]);
- input feeding: h~_{t-1} goes into the next LSTM step, so the decoder knows where it attended.
The state is (h, c, h~); a (h, c) pair, as the encoder hands over, starts h~ at zeros.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .baseline import Encoder, decode_teacher_forced


class LuongDecoder(nn.Module):
    """An input-feeding LSTMCell decoder that attends with its current state and predicts from h~_t."""

    def __init__(self, tgt_vocab: int, embed_dim: int, hidden_dim: int, attention: nn.Module) -> None:
        super().__init__()
        self.embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=0)
        self.attn = attention
        self.rnn = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.Wa = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.Wc = nn.Linear(2 * hidden_dim, hidden_dim, bias=False)
        self.head = nn.Linear(hidden_dim, tgt_vocab)

    def forward_step(
        self,
        y_prev: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        encoder_outputs: torch.Tensor,
        src_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        """One step: y_prev (B, 1), state (h, c[, h~]) each (B, H) -> logits (B, V), (h, c, h~), alpha (B, T_src)."""
        h_prev, c_prev = state[0], state[1]  # (B, H) each
        feed = state[2] if len(state) > 2 else torch.zeros_like(h_prev)  # (B, H), h~_{t-1}
        e = self.embed(y_prev).squeeze(1)  # (B, E)
        h, c = self.rnn(torch.cat([e, feed], dim=-1), (h_prev, c_prev))  # (B, H) each
        context, alpha = self.attn(encoder_outputs, self.Wa(h), src_mask)  # the query is W_a h_t
        h_tilde = torch.tanh(self.Wc(torch.cat([context, h], dim=-1)))  # (B, H)
        return self.head(h_tilde), (h, c, h_tilde), alpha


class Seq2SeqLuong(nn.Module):
    """Encoder plus LuongDecoder, with Seq2SeqAttn's constructor (and an attention module) and forward."""

    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int, hidden_dim: int, attention: nn.Module) -> None:
        super().__init__()
        self.encoder = Encoder(src_vocab, embed_dim, hidden_dim)
        self.decoder = LuongDecoder(tgt_vocab, embed_dim, hidden_dim, attention)
        self.tgt_vocab = tgt_vocab

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        teacher_forcing_ratio: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predict tgt[:, 1:] from tgt[:, :-1]: logits (B, T_tgt - 1, V) and alpha (B, T_tgt - 1, T_src)."""
        return decode_teacher_forced(self, src, src_mask, tgt, teacher_forcing_ratio)
