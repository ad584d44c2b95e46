# Student file, generated from the reference by `grade stubs`: replace each NotImplementedError.
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
        raise NotImplementedError("piece 'luong': write LuongDotAttention.forward")
