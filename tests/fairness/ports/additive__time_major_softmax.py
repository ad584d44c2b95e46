"""Port of a time-major Bahdanau attention into the lab's batch-first API, its softmax dimension kept.

Source: 1666sApple/Transformer-based-natural-machine-translation, model/BahdanauAttentionQKV.py
(BahdanauAttentionQKV.forward, at 7b4b908).

    energy_input = torch.tanh(query_out.unsqueeze(0) + key_out)      # (Src, B, H)
    energies = self.energy_layer(energy_input).squeeze(2)            # (Src, B)
    if src_mask is not None:
        energies.data.masked_fill_(src_mask == 0, float("-inf"))
    weights = F.softmax(energies, dim=0)                             # over Src there
    return weights.transpose(0, 1)

Changes to fit the lab's API: the encoder states come batch first, so the energies are (B, T_src) and the
final transpose goes; query_layer is the lab's Ws, key_layer its Wh, energy_layer its v (no biases).
`dim=0` is kept, which here is the batch: the mistake of porting time-major code without its layout.
Not equivalent. Expected: the hint names the softmax over the source positions (the last dimension).
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
        query_out = self.Ws(decoder_state)
        key_out = self.Wh(encoder_outputs)
        energy_input = torch.tanh(query_out.unsqueeze(1) + key_out)
        energies = self.v(energy_input).squeeze(2)
        if src_mask is not None:
            energies.data.masked_fill_(src_mask == 0, float("-inf"))
        weights = F.softmax(energies, dim=0)
        return torch.bmm(weights.unsqueeze(1), encoder_outputs).squeeze(1), weights
