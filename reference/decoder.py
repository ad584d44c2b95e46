"""Piece `decoder`: one attentive decoder step, and the seq2seq model under teacher forcing."""
from __future__ import annotations

import torch
import torch.nn as nn

from .additive import BahdanauAttention
from .encoder import EncoderAll


class AttnDecoder(nn.Module):
    """An LSTMCell decoder that attends over the encoder states before every step."""

    def __init__(self, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=0)
        self.attn = BahdanauAttention(hidden_dim)
        self.rnn = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.head = nn.Linear(hidden_dim * 2, tgt_vocab)

    def forward_step(
        self,
        y_prev: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        encoder_outputs: torch.Tensor,
        src_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """Decode one target position.

        Args:
            y_prev: (B, 1) int64, the previous target token.
            state: (h_prev, c_prev), each (B, H), the decoder state before this step.
            encoder_outputs: (B, T_src, H) all encoder states.
            src_mask: (B, T_src) bool, True at real source tokens.

        Returns:
            logits: (B, V_tgt), computed from [h; context]: the head's raw scores. Their log_softmax is
                accepted too (it shifts each row by a constant, which leaves softmax, argmax, the
                cross-entropy loss and every gradient unchanged); probabilities (softmax) are not.
            (h, c): each (B, H), the new decoder state.
            alpha: (B, T_src), the attention weights used at this step.
        """
        ### BEGIN SOLUTION
        h_prev, c_prev = state  # (B, H) each
        e = self.embed(y_prev).squeeze(1)  # (B, E)
        context, alpha = self.attn(encoder_outputs, h_prev, src_mask)  # the query is s_{t-1}
        h, c = self.rnn(torch.cat([e, context], dim=-1), (h_prev, c_prev))  # (B, H) each
        logits = self.head(torch.cat([h, context], dim=-1))  # (B, V_tgt)
        return logits, (h, c), alpha
        ### END SOLUTION


class Seq2SeqAttn(nn.Module):
    """EncoderAll plus AttnDecoder, started from the encoder's final state."""

    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.encoder = EncoderAll(src_vocab, embed_dim, hidden_dim)
        self.decoder = AttnDecoder(tgt_vocab, embed_dim, hidden_dim)
        self.tgt_vocab = tgt_vocab

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        teacher_forcing_ratio: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the decoder over tgt[:, :-1] and predict tgt[:, 1:].

        Args:
            src: (B, T_src) int64 source ids; src_mask: (B, T_src) bool, True at real tokens.
            tgt: (B, T_tgt) int64 target ids starting with <sos>.
            teacher_forcing_ratio: probability of feeding the true previous token (1.0: always).

        Returns:
            logits: (B, T_tgt - 1, V_tgt), one row per predicted position (forward_step's logits, or
                their log_softmax).
            alpha: (B, T_tgt - 1, T_src), the attention weights of every step.
        """
        ### BEGIN SOLUTION
        enc_outputs, (h, c) = self.encoder(src)  # (B, T_src, H); (1, B, H) each
        state = (h.squeeze(0), c.squeeze(0))  # (B, H) each
        y_prev = tgt[:, :1]  # (B, 1), <sos>
        all_logits, all_alpha = [], []
        for t in range(1, tgt.size(1)):
            logits, state, alpha = self.decoder.forward_step(y_prev, state, enc_outputs, src_mask)
            all_logits.append(logits)
            all_alpha.append(alpha)
            if teacher_forcing_ratio >= 1.0 or torch.rand(()).item() < teacher_forcing_ratio:
                y_prev = tgt[:, t : t + 1]
            else:
                y_prev = logits.argmax(-1, keepdim=True)
        return torch.stack(all_logits, dim=1), torch.stack(all_alpha, dim=1)
        ### END SOLUTION
