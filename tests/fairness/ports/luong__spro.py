"""Port of practical-pytorch's batched `Attn` with method "dot": a loop over every score, no mask, no scaling.

Source: spro/practical-pytorch, seq2seq-translation/seq2seq-translation-batched.py (Attn.forward and
Attn.score, at c520c52).

    attn_energies = Variable(torch.zeros(batch_size, seq_len)) # B x S
    if USE_CUDA:
        attn_energies = attn_energies.cuda()
    for b in range(batch_size):
        for i in range(seq_len):
            attn_energies[b, i] = self.score(hidden[:, b], encoder_outputs[i, b].unsqueeze(0))
    return F.softmax(attn_energies).unsqueeze(1)
    ...
    energy = hidden.dot(encoder_output)

Changes to fit the lab's API: batch first; `.cuda()` behind a global flag becomes a move to the inputs'
device; the context (the tutorial's decoder computes it) is the weights' bmm with the encoder states;
the mask is taken and, as in the original, not used; the implicit softmax dimension of a 2-d input is 1.
Not equivalent (unscaled, unmasked). Expected: the hints name the missing scaling and the pads' weights.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class LuongDotAttention(nn.Module):
    def score(self, hidden, encoder_output):
        return hidden.dot(encoder_output)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        batch_size, seq_len = encoder_outputs.size(0), encoder_outputs.size(1)
        attn_energies = torch.zeros(batch_size, seq_len).to(encoder_outputs.device)  # B x S
        for b in range(batch_size):
            for i in range(seq_len):
                attn_energies[b, i] = self.score(decoder_state[b], encoder_outputs[b, i])
        alpha = F.softmax(attn_energies, dim=1)
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1), alpha
