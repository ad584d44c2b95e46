"""A chain of calls whose every input is made from the answer before it: the worker runs it (its trusted `chain`
command), the judge runs it again to check each answer, and both draw the same inputs from the same bytes.

Step k calls the context on alpha with its positions shuffled by a permutation drawn from the bytes of step k-1's
answer. No step's input exists before the step before it has answered, so code cannot work out many steps at once
(a loop over the sentences paid once for every step), nor keep answers for inputs it saw before; every answer is
checked against the judge's own, computed on the permutation the worker's previous answer gives.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch


def answer_bytes(out: object) -> bytes:
    """The bytes the next step's permutation is drawn from: the answer as float32 values, whatever its dtype."""
    if not isinstance(out, torch.Tensor):
        return repr(type(out)).encode()
    return out.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()


def permutation(previous: bytes, T: int, seed: int) -> torch.Tensor:
    """The positions of step k, drawn from the bytes of step k-1's answer (b"" for the first step) and the seed.

    Drawn from all 256 bits of their SHA-256: an answer's low bits, which the checks' tolerance leaves free, cannot
    be steered to repeat an earlier step's permutation (CRC32 is linear, and torch's CPU generator keeps only 32 bits
    of its seed: both let a loop that remembers its last answer run once a chain; issue 49's red-team pass)."""
    digest = hashlib.sha256(seed.to_bytes(8, "little", signed=True) + previous).digest()
    rng = np.random.default_rng(np.frombuffer(digest, dtype=np.uint64))
    return torch.from_numpy(rng.permutation(T))


def run(fn, alpha: torch.Tensor, enc: torch.Tensor, steps: int, seed: int) -> list:
    """The answers of `steps` chained calls of fn(alpha with its positions permuted, enc)."""
    outs: list = []
    previous = b""
    while len(outs) < steps:  # not `for _ in range(steps)`: a line of the lab's sealed code (test_release_answers)
        out = fn(alpha.index_select(1, permutation(previous, alpha.size(1), seed)), enc)
        outs.append(out)
        previous = answer_bytes(out)
    return outs
