"""Port of IBM pytorch-seq2seq's `Attention` (Luong's dot score, unscaled, masked through .data).

Source: IBM/pytorch-seq2seq, seq2seq/models/attention.py (Attention.forward, at f146087).

    attn = torch.bmm(output, context.transpose(1, 2))
    if self.mask is not None:
        attn.data.masked_fill_(self.mask, -float('inf'))
    attn = F.softmax(attn.view(-1, input_size), dim=1).view(batch_size, -1, input_size)
    mix = torch.bmm(attn, context)

Changes to fit the lab's API: the mask (IBM's, True at pads, set by set_mask) is ~src_mask; one step
(output_len = 1); `mix` is the context, without IBM's linear_out, which belongs to its decoder.
Not equivalent (unscaled). Expected: the hint names the missing scaling by sqrt(d).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class LuongDotAttention(nn.Module):
    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        output, context = decoder_state.unsqueeze(1), encoder_outputs
        mask = None if src_mask is None else ~src_mask.unsqueeze(1)
        batch_size = output.size(0)
        input_size = context.size(1)
        attn = torch.bmm(output, context.transpose(1, 2))
        if mask is not None:
            attn.data.masked_fill_(mask, -float("inf"))
        attn = F.softmax(attn.view(-1, input_size), dim=1).view(batch_size, -1, input_size)
        mix = torch.bmm(attn, context)
        return mix.squeeze(1), attn.squeeze(1)
