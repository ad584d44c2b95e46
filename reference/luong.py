"""Piece `luong`: Luong's dot-product attention, scaled by sqrt(d) as in the transformer."""
from __future__ import annotations

import torch
import torch.nn as nn

from .context import attention_context


class LuongDotAttention(nn.Module):
    """Scaled dot-product attention: e_i = h_i . s / sqrt(d); no learned parameters."""

    def forward(
        self,
        encoder_outputs: torch.Tensor,
        decoder_state: torch.Tensor,
        src_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from one decoder state over all encoder states.

        Args:
            encoder_outputs: (B, T_src, d) encoder states, the keys and the values.
            decoder_state: (B, d) the query.
            src_mask: (B, T_src) bool, True at real tokens and False at pads; None means no pads.

        Returns:
            context: (B, d), the alpha-weighted sum of encoder states.
            alpha: (B, T_src), softmax of the scaled scores; exactly 0 at pads.
        """
        ### BEGIN SOLUTION
        d = encoder_outputs.size(-1)
        scores = torch.bmm(encoder_outputs, decoder_state.unsqueeze(-1)).squeeze(-1)  # (B, T_src)
        scores = scores / d**0.5  # keeps the softmax out of saturation as d grows
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)  # (B, T_src)
        return attention_context(alpha, encoder_outputs), alpha
        ### END SOLUTION
