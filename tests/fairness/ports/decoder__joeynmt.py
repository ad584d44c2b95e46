"""Port of JoeyNMT's `RecurrentDecoder._forward_step`: the RNN first, then attention with its new state.

Source: joeynmt/joeynmt, joeynmt/decoders.py (RecurrentDecoder._forward_step, at cdc4d03).

        if self.input_feeding:
            rnn_input = torch.cat([prev_embed, prev_att_vector], dim=2)
        ...
        _, hidden = self.rnn(rnn_input, hidden)
        if isinstance(hidden, tuple):
            query = hidden[0][-1].unsqueeze(1)
        ...
        context, att_probs = self.attention(query=query, values=encoder_output, mask=src_mask)
        att_vector_input = torch.cat([query, context], dim=2)

Changes to fit the lab's API: the lab's LSTMCell, its Bahdanau attention and its head on [h; context]
(JoeyNMT's att_vector_layer and output layer); forward_step carries only (h, c), so the previous hidden state
stands for JoeyNMT's previous attention vector in the input feeding.
Not equivalent: Luong's order (attend with s_t), where the lab's decoder attends with s_{t-1} before its
LSTMCell. Expected: the hint names the new state as the query.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .additive import BahdanauAttention
from .encoder import EncoderAll


class AttnDecoder(nn.Module):
    def __init__(self, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=0)
        self.attn = BahdanauAttention(hidden_dim)
        self.rnn = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.head = nn.Linear(hidden_dim * 2, tgt_vocab)

    def forward_step(self, y_prev, state, encoder_outputs, src_mask=None):
        prev_embed, prev_att_vector = self.embed(y_prev).squeeze(1), state[0]
        rnn_input = torch.cat([prev_embed, prev_att_vector], dim=1)
        hidden = self.rnn(rnn_input, state)
        query = hidden[0]
        context, att_probs = self.attn(encoder_outputs, query, src_mask)
        att_vector_input = torch.cat([query, context], dim=1)
        return self.head(att_vector_input), hidden, att_probs


class Seq2SeqAttn(nn.Module):
    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.encoder = EncoderAll(src_vocab, embed_dim, hidden_dim)
        self.decoder = AttnDecoder(tgt_vocab, embed_dim, hidden_dim)
        self.tgt_vocab = tgt_vocab

    def forward(self, src, src_mask, tgt, teacher_forcing_ratio: float = 1.0):
        encoder_output, (h, c) = self.encoder(src)
        hidden = (h.squeeze(0), c.squeeze(0))
        outputs, att_probs = [], []
        for t in range(1, tgt.size(1)):
            out, hidden, att = self.decoder.forward_step(tgt[:, t - 1 : t], hidden, encoder_output, src_mask)
            outputs.append(out)
            att_probs.append(att)
        return torch.stack(outputs, 1), torch.stack(att_probs, 1)
