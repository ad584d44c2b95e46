"""Port of `BahdanauAttention` from PyTorch's translation tutorial, as published (it has no mask).

Source: pytorch/tutorials, intermediate_source/seq2seq_translation_tutorial.py (the version with
BahdanauAttention and a batched AttnDecoderRNN, from 2023 on; read from its copy
tanph-sg/PyTorch_Tutorials at 398f3f70).

    scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
    scores = scores.squeeze(2).unsqueeze(1)
    weights = F.softmax(scores, dim=-1)
    context = torch.bmm(weights, keys)

Changes to fit the lab's API: Wa is the lab's Ws (the query, s_{t-1}), Ua its Wh (the keys, h_i), Va its
v, without biases (the lab's layout); the query is given as (B, H) and unsqueezed to the tutorial's
(B, 1, H); src_mask is taken and, as in the tutorial, not used.
Not equivalent: pads get weight. Expected: the cases with pads fail, and their hint names the mask.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .context import attention_context  # noqa: F401 - the lab's import; the tutorial's bmm is kept


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.Wh = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.Ws = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        query, keys = decoder_state.unsqueeze(1), encoder_outputs
        scores = self.v(torch.tanh(self.Ws(query) + self.Wh(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context.squeeze(1), weights.squeeze(1)
