"""Port of bentrevett/pytorch-seq2seq's packing `Encoder`: pack_padded_sequence with the lengths on the CPU.

Source: bentrevett/pytorch-seq2seq,
"legacy/4 - Packed Padded Sequences, Masking, Inference and BLEU.ipynb" (class Encoder, at b3cd54c).

    #need to explicitly put lengths on cpu!
    packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, src_len.to('cpu'))
    packed_outputs, hidden = self.rnn(packed_embedded)
    outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs)

Changes to fit the lab's API: the lab's unidirectional LSTM, batch first, without the notebook's GRU,
bidirectional layer, dropout and fc over the two directions; src_len is counted from the pads (id 0),
since the lab's forward takes only src; enforce_sorted=False (the notebook's batches come sorted);
total_length keeps the outputs (B, T_src, H) when every row has pads.
Equivalent: full marks (a packed encoder's final state is the state after the last real token, which
the padded-row case accepts), on the device too.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class EncoderAll(nn.Module):
    def __init__(self, src_vocab: int, embed_dim: int = 128, hidden_dim: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(src_vocab, embed_dim, padding_idx=0)
        self.rnn = nn.LSTM(embed_dim, hidden_dim, batch_first=True)

    def forward(self, src: torch.Tensor):
        src_len = (src != 0).sum(1)
        embedded = self.embed(src)
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, src_len.to("cpu"), batch_first=True,
                                                            enforce_sorted=False)
        packed_outputs, hidden = self.rnn(packed_embedded)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs, batch_first=True, total_length=src.size(1))
        return outputs, hidden
