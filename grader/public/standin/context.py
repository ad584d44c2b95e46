"""Stand-in for context.py's `attention_context`: deliberately not the weighted sum the context piece computes."""
from __future__ import annotations

import torch


def attention_context(alpha: torch.Tensor, encoder_outputs: torch.Tensor) -> torch.Tensor:
    """(B, T_src) weights and (B, T_src, H) states -> (B, H): the largest weighted, squashed state per feature.

    It depends on every weight and every state, so what a piece returns from it shows that the piece passed it
    its own alpha and the encoder states; it is never the alpha-weighted sum (a max, of tanh'd states).
    """
    squashed = torch.tanh(encoder_outputs) * alpha[:, :, None]  # (B, T_src, H)
    return squashed.amax(dim=1)
