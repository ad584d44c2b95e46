"""The no-attention seq2seq baseline: the whole source squeezed through the encoder's final state.

Trusted scaffolding for the length curve. It keeps the attention model's interface (`encoder(src)`
and `decoder.forward_step(y, state, outputs, mask)` returning an alpha) so the grader's training
loop and evaluator run it unchanged; its alpha is all zeros because it attends to nothing.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class Encoder(nn.Module):
    """Embed source tokens and run an LSTM; the decoder only ever sees the final (h, c)."""

    def __init__(self, src_vocab: int, embed_dim: int = 32, hidden_dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(src_vocab, embed_dim, padding_idx=0)
        self.rnn = nn.LSTM(embed_dim, hidden_dim, batch_first=True)

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Return (outputs (B, T_src, H), (h, c) each (1, B, H)), like EncoderAll."""
        # Pads sit at the end and run through the LSTM too, exactly as in EncoderAll: the two models
        # differ only in attention, which is the comparison the length curve is about.
        return self.rnn(self.embed(src))  # (B, T_src, H); (1, B, H) each


class Decoder(nn.Module):
    """An LSTMCell decoder fed only its previous token; the source reaches it through the initial state."""

    def __init__(self, tgt_vocab: int, embed_dim: int = 32, hidden_dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=0)
        self.rnn = nn.LSTMCell(embed_dim, hidden_dim)
        self.head = nn.Linear(hidden_dim, tgt_vocab)

    def forward_step(
        self,
        y_prev: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        encoder_outputs: torch.Tensor,
        src_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """One step: y_prev (B, 1), state (B, H) each -> logits (B, V), (h, c), alpha (B, T_src) of zeros."""
        e = self.embed(y_prev).squeeze(1)  # (B, E)
        h, c = self.rnn(e, state)  # (B, H) each
        # zeros, not uniform weights: nothing is attended, and a heatmap of it should look empty
        alpha = encoder_outputs.new_zeros(encoder_outputs.shape[:2])  # (B, T_src)
        return self.head(h), (h, c), alpha


class Seq2SeqBaseline(nn.Module):
    """Encoder plus Decoder, with Seq2SeqAttn's constructor and forward signature."""

    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 32, hidden_dim: int = 64) -> None:
        super().__init__()
        self.encoder = Encoder(src_vocab, embed_dim, hidden_dim)
        self.decoder = Decoder(tgt_vocab, embed_dim, hidden_dim)
        self.tgt_vocab = tgt_vocab

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        teacher_forcing_ratio: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predict tgt[:, 1:] from tgt[:, :-1]: logits (B, T_tgt - 1, V) and alpha (B, T_tgt - 1, T_src) of zeros."""
        return decode_teacher_forced(self, src, src_mask, tgt, teacher_forcing_ratio)


def decode_teacher_forced(
    model: nn.Module, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, teacher_forcing_ratio: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The lab models' forward (this baseline's and Luong's): encode, start the decoder from the encoder's final
    state, feed tgt[:, :-1] (or, below ratio 1, sometimes the model's own argmax) one forward_step at a time."""
    outputs, (h, c) = model.encoder(src)  # (B, T_src, H); (1, B, H) each
    state: tuple[torch.Tensor, ...] = (h[-1], c[-1])  # (B, H) each
    y_prev = tgt[:, :1]  # (B, 1), <sos>
    all_logits, all_alpha = [], []
    for t in range(1, tgt.size(1)):
        logits, state, alpha = model.decoder.forward_step(y_prev, state, outputs, src_mask)
        all_logits.append(logits)
        all_alpha.append(alpha)
        if teacher_forcing_ratio >= 1.0 or torch.rand(()).item() < teacher_forcing_ratio:
            y_prev = tgt[:, t : t + 1]
        else:
            y_prev = logits.argmax(-1, keepdim=True)
    return torch.stack(all_logits, dim=1), torch.stack(all_alpha, dim=1)
