# The lesson's listing (S035 §4), pasted into the encoder stub unchanged.
import torch
import torch.nn as nn
import torch.nn.functional as F
 
class EncoderAll(nn.Module):
    def __init__(self, src_vocab, embed_dim=128, hidden_dim=256):
        super().__init__()
        self.embed = nn.Embedding(src_vocab, embed_dim, padding_idx=0)
        self.rnn = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
 
    def forward(self, src):
        e = self.embed(src)
        outputs, (h, c) = self.rnn(e)          # outputs: (B, T_src, H)
        return outputs, (h, c)
