"""Small inputs for the public checks (B, T_src, E, H all different), and the checks two pieces share."""
from __future__ import annotations

import torch

from grader.judge import verdicts
from grader.public.standin import context as standin_context

B, T, E, H, V = 3, 7, 5, 6, 11


def mask() -> torch.Tensor:
    n = torch.tensor([T, 4, 2])
    return torch.arange(T)[None, :] < n[:, None]  # (B, T) True at real tokens


def attention_properties(out, enc: torch.Tensor, m: torch.Tensor, standin: bool = False) -> None:
    """(context, alpha) from an attention module: shapes, a distribution over real tokens, the weighted sum. With the
    stand-in attention_context (`standin`), the context may also be what it returns for (alpha, enc)."""
    context, alpha = verdicts.pair(out, "forward's result (context, alpha)")
    verdicts.tensor(context, "context", (B, H), torch.float32)
    verdicts.tensor(alpha, "alpha", (B, T), torch.float32)
    verdicts.finite(alpha, "alpha", "Fill pad scores, not real ones: src_mask is True at real tokens.")
    if alpha.masked_select(~m).abs().max() > 0:
        verdicts.fail("alpha is not exactly 0 at pad positions: set their scores to -inf before the softmax.")
    if not verdicts.is_close(alpha.sum(-1), torch.ones(B)):
        verdicts.fail("the rows of alpha do not sum to 1: softmax over the source positions.")
    if standin and verdicts.is_close(context, standin_context.attention_context(alpha, enc)):
        return  # forward handed attention_context its alpha and the encoder states and returned what it gave
    verdicts.close(context, (alpha[..., None] * enc).sum(1), "context",
                   "The context is the alpha-weighted sum of encoder states: return attention_context(alpha, "
                   "encoder_outputs)." if standin else "The context is the alpha-weighted sum of encoder states.")
