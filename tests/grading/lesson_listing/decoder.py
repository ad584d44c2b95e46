# The lesson's listings (S035 §4 and §4.1), pasted into the decoder stub below its imports.
import torch
import torch.nn as nn
import torch.nn.functional as F

from .additive import BahdanauAttention
from .encoder import EncoderAll

class AttnDecoder(nn.Module):
    def __init__(self, tgt_vocab, embed_dim=128, hidden_dim=256):
        super().__init__()
        self.embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=0)
        self.attn = BahdanauAttention(hidden_dim)
        self.rnn = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.head = nn.Linear(hidden_dim * 2, tgt_vocab)   # concat output + context
 
    def forward_step(self, y_prev, state, encoder_outputs, src_mask):
        h_prev, c_prev = state                  # (B, H) each
        e = self.embed(y_prev).squeeze(1)       # (B, E)
        context, alpha = self.attn(encoder_outputs, h_prev, src_mask)
        rnn_input = torch.cat([e, context], dim=-1)
        h, c = self.rnn(rnn_input, (h_prev, c_prev))
        logits = self.head(torch.cat([h, context], dim=-1))
        return logits, (h, c), alpha

class Seq2SeqAttn(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, embed_dim=128, hidden_dim=256):
        super().__init__()
        self.encoder = EncoderAll(src_vocab, embed_dim, hidden_dim)
        self.decoder = AttnDecoder(tgt_vocab, embed_dim, hidden_dim)
        self.tgt_vocab = tgt_vocab
 
    def forward(self, src, src_mask, tgt, teacher_forcing_ratio=1.0):
        B, T_tgt = tgt.shape
        enc_outputs, (h, c) = self.encoder(src)
        state = (h.squeeze(0), c.squeeze(0))
        y_prev = tgt[:, :1]
        all_logits = torch.zeros(B, T_tgt-1, self.tgt_vocab, device=src.device)
        all_alpha = torch.zeros(B, T_tgt-1, enc_outputs.size(1), device=src.device)
        for t in range(1, T_tgt):
            logits, state, alpha = self.decoder.forward_step(y_prev, state, enc_outputs, src_mask)
            all_logits[:, t-1] = logits
            all_alpha[:, t-1] = alpha
            use_teacher = torch.rand(1).item() < teacher_forcing_ratio
            y_prev = tgt[:, t:t+1] if use_teacher else logits.argmax(-1, keepdim=True)
        return all_logits, all_alpha
