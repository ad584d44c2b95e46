"""The trusted, seeded training loop the grader uses on a submission's model."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import toy


@dataclass
class TrainConfig:
    """Model size and schedule of the length-30 check (sized for a 2-core CPU)."""

    embed_dim: int = 32
    hidden_dim: int = 64
    # small batches, many updates: alignment needs updates, and a step of 32 costs 0.6x a step of 64
    batch_size: int = 32
    lr: float = 0.02
    betas: tuple[float, float] = (0.9, 0.98)  # a shorter second-moment memory: fewer steps to the target
    max_steps: int = 2600
    clip: float = 5.0  # 1.0 slowed the late, alignment-sharpening updates
    seed: int = 0
    eval_every: int = 100
    target_len: int = 30
    target_acc: float = 0.98  # stop early once the validation sentences of target_len reach it ...
    long_len: int = 40
    long_acc: float = 0.95  # ... and those of long_len reach this (0 leaves only the target_len check)
    short_steps: int = 0  # curriculum: the first steps see short sentences only
    short_len: int = 10
    threads: int = 1  # as fast as two on matrices this small, and no spinning when batch grading shares cores

    def met(self, at_target: float, at_long: float) -> bool:
        """Whether validation accuracies at target_len and long_len meet the early-stop targets."""
        return at_target >= self.target_acc and at_long >= self.long_acc


@dataclass
class TrainResult:
    steps: int
    seconds: float
    history: list[tuple[int, float, float, float]]  # (step, seconds, valid. accuracy at target_len, at long_len)


def train(
    model: nn.Module,
    cfg: TrainConfig,
    progress: Callable[[int, int, float], None] | None = None,
) -> TrainResult:
    """Train with teacher forcing and Adam on bucketed batches; deterministic for a given seed."""
    from .evaluate import accuracy_by_length  # trusted, never the submission's evaluator

    torch.set_num_threads(cfg.threads)
    gen = torch.Generator().manual_seed(cfg.seed)
    pairs = toy.read_split("train")
    valid = [p for p in toy.read_split("valid") if len(p[0]) in (cfg.target_len, cfg.long_len)]
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.betas)
    # OneCycleLR needs at least two warm-up steps; tiny budgets (notebook smoke runs) stretch the warm-up
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=max(cfg.max_steps, 3),
                                                pct_start=max(0.1, 2.0 / max(cfg.max_steps, 3)))
    model.train()
    history: list[tuple[int, float, float, float]] = []
    start = time.perf_counter()
    step = 0
    short = [p for p in pairs if len(p[0]) <= cfg.short_len]
    batches: list[toy.Batch] = []
    while step < cfg.max_steps:
        if step == cfg.short_steps:
            batches = []
        if not batches:
            batches = toy.bucketed_batches(short if step < cfg.short_steps else pairs, cfg.batch_size, gen)
        b = batches.pop()
        logits, _ = model(b.src, b.src_mask, b.tgt)  # (B, T_tgt - 1, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), b.tgt[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        sched.step()
        step += 1
        if progress:
            progress(step, cfg.max_steps, float(loss.detach()))
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            acc = accuracy_by_length(model, valid)
            history.append((step, time.perf_counter() - start, acc[cfg.target_len], acc[cfg.long_len]))
            if cfg.met(acc[cfg.target_len], acc[cfg.long_len]):
                break
    return TrainResult(step, time.perf_counter() - start, history)
