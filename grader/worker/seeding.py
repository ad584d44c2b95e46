"""Seeding torch as `torch.manual_seed` does, at a fraction of its cost on a build without accelerators."""
from __future__ import annotations

import torch


def _accelerated() -> bool:
    """Whether this torch build could drive a CUDA, ROCm, XPU or MPS device (what it was built with, not a device)."""
    xpu = getattr(torch, "xpu", None)
    return bool(torch.backends.cuda.is_built() or torch.backends.mps.is_built()
                or (xpu is not None and getattr(xpu, "_is_compiled", lambda: False)()))


ACCELERATED = _accelerated()


def manual_seed(seed: int) -> None:
    """Seed torch's generators. On a CPU-only build that is the CPU generator alone, as torch.manual_seed leaves it:
    torch.manual_seed also queues a seed for each accelerator kind it might meet later, recording a stack trace for
    each (about 2.5 ms a call, and the judges seed every case)."""
    if ACCELERATED:
        torch.manual_seed(seed)
    else:
        torch.random.default_generator.manual_seed(seed)
