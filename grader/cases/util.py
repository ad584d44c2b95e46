"""Shared inputs for the hidden cases: seeded random sizes and tensors that never make B = T = H."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from grader import checks


@dataclass(frozen=True)
class Sizes:
    B: int
    T: int  # T_src
    E: int
    H: int
    V: int


MAIN = Sizes(B=3, T=7, E=5, H=6, V=11)
SINGLE_SENTENCE = Sizes(B=1, T=5, E=4, H=7, V=9)
SINGLE_TOKEN = Sizes(B=4, T=1, E=3, H=5, V=8)
EDGES = [pytest.param(SINGLE_SENTENCE, id="B=1"), pytest.param(SINGLE_TOKEN, id="T_src=1")]


def lengths(s: Sizes) -> torch.Tensor:
    """Real source lengths: the first row is full, the others shorter, so every batch has pads."""
    n = torch.randint(1, s.T + 1, (s.B,))
    n[0] = s.T
    return n


def mask_for(n: torch.Tensor, T: int, device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.arange(T, device=device)[None, :] < n.to(device)[:, None]  # (B, T) True at real tokens


def src_ids(s: Sizes, n: torch.Tensor) -> torch.Tensor:
    ids = torch.randint(1, s.V, (s.B, s.T))
    return ids.masked_fill(~mask_for(n, s.T), 0)


def build(sub, cls: str, *args, what: str | None = None):
    """The student's class `cls` built in the worker with `args`; a handle to it."""
    return checks.call(sub.new, cls, *args, what=f"{what or cls}(...) constructor")


def cuda_or_skip() -> torch.device:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here; this case runs where one is present")
    return torch.device("cuda")
