# The lesson's listing (S035 §6), pasted into the luong stub unchanged.
import torch
import torch.nn as nn
import torch.nn.functional as F

class LuongDotAttention(nn.Module):
    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        # encoder_outputs: (B, T_src, H), decoder_state: (B, H)
        d = encoder_outputs.size(-1)
        scores = torch.bmm(encoder_outputs, decoder_state.unsqueeze(-1)).squeeze(-1)
        scores = scores / (d ** 0.5)                # scaled dot-product
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float('-inf'))
        alpha = F.softmax(scores, dim=-1)
        context = torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)
        return context, alpha
