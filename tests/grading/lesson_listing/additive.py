# The lesson's listing (S035 §4), pasted into the additive stub unchanged.
import torch
import torch.nn as nn
import torch.nn.functional as F

class BahdanauAttention(nn.Module):
    def __init__(self, hidden_dim):
        super().__init__()
        self.Wh = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.Ws = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v  = nn.Linear(hidden_dim, 1, bias=False)
 
    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        # encoder_outputs: (B, T_src, H)
        # decoder_state:   (B, H)
        # src_mask:        (B, T_src) with 1 for real tokens, 0 for pad
        s = decoder_state.unsqueeze(1)          # (B, 1, H)
        scores = self.v(torch.tanh(self.Wh(encoder_outputs) + self.Ws(s)))
        scores = scores.squeeze(-1)             # (B, T_src)
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float('-inf'))
        alpha = F.softmax(scores, dim=-1)       # (B, T_src)
        context = torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)  # (B, H)
        return context, alpha
