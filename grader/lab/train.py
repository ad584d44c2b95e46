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
    # small batches, many updates: learning the alignment takes updates more than samples
    batch_size: int = 32
    lr: float = 0.02
    betas: tuple[float, float] = (0.9, 0.98)  # a shorter second-moment memory: fewer steps to the target
    max_steps: int = 2600
    clip: float = 5.0  # loose enough to leave the late, alignment-sharpening updates their size
    seed: int = 0
    eval_every: int = 100
    target_len: int = 30
    target_acc: float = 0.98  # stop early once the validation sentences of target_len reach it ...
    long_len: int = 40
    long_acc: float = 0.95  # ... and those of long_len reach this (0 leaves only the target_len check)
    short_steps: int = 0  # curriculum: the first steps see short sentences only
    short_len: int = 10
    threads: int = 1  # as fast as two on matrices this small, and no spinning when batch grading shares cores

    def met(self, acc: dict[int, float]) -> bool:
        """Whether validation accuracies by length meet the early-stop targets."""
        return acc[self.target_len] >= self.target_acc and acc.get(self.long_len, 0.0) >= self.long_acc

    def valid_pairs(self) -> list[tuple[list[str], list[str]]]:
        """The validation sentences the stop rule reads; long ones only when long_acc asks for them
        (each is decoded every eval_every steps, and a length-40 sentence costs 41 decoder steps)."""
        lengths = (self.target_len, self.long_len) if self.long_acc > 0 else (self.target_len,)
        return [p for p in toy.read_split("valid") if len(p[0]) in lengths]


# The graded training cases start every parameter from a checkpoint of the reference's own run from scratch
# (TrainConfig() for Bahdanau, luong() for Luong's model), taken WARM_STEP[kind] steps in: models that translate
# length-30 test sentences at 0.67 and 0.76, so a decoder that cannot learn, or an attention through which nothing
# learns, stays below the 0.90 the case asks for, while one that learns gets there in GRADED_STEPS[kind] updates
# (docs/performance.md, bench/warm_sweep.py). `grade artifacts` writes the checkpoints.
WARM_STEP = {"bahdanau": 1550, "luong": 900}


def luong() -> TrainConfig:
    """Luong's model (grader/lab/luong_model.py) from scratch: the same loop and stop rule, Adam at 0.01
    (half the reference's rate: it keeps length 40 above 0.90), one cycle over 1800 steps, which fits the
    reference's training time (docs/performance.md)."""
    return TrainConfig(max_steps=1800, lr=0.01)


GRADED_STEPS = {"bahdanau": 80, "luong": 120}


def graded(kind: str = "bahdanau") -> TrainConfig:
    """The graded cases' schedule from the WARM_STEP[kind] checkpoint: one cycle at Adam 0.005 over GRADED_STEPS[kind]
    steps, all of them taken (no early stop: the cycle anneals to its end, and a stop read off 20 validation
    sentences in mid-cycle is noise), with one validation decode at the end for the progress display."""
    steps = GRADED_STEPS[kind]
    return TrainConfig(max_steps=steps, lr=0.005, eval_every=steps, target_acc=2.0, long_acc=0.0)


@dataclass
class TrainResult:
    steps: int
    seconds: float
    history: list[tuple[int, float, float, float]]  # (step, seconds, valid. accuracy at target_len, at long_len)


class Trainer:
    """The teacher-forced Adam steps of the schedule, run in chunks; no evaluation (that is the caller's)."""

    def __init__(self, model: nn.Module, cfg: TrainConfig | dict, pairs: list | None = None) -> None:
        self.cfg = cfg if isinstance(cfg, TrainConfig) else TrainConfig(**{**cfg, "betas": tuple(cfg["betas"])})
        torch.set_num_threads(self.cfg.threads)
        self.model = model
        self.gen = torch.Generator().manual_seed(self.cfg.seed)
        self.pairs = pairs if pairs is not None else toy.read_split("train")
        self.short = [p for p in self.pairs if len(p[0]) <= self.cfg.short_len]
        self.opt = torch.optim.Adam(model.parameters(), lr=self.cfg.lr, betas=self.cfg.betas)
        # OneCycleLR needs at least two warm-up steps; tiny budgets (notebook smoke runs) stretch the warm-up
        total = max(self.cfg.max_steps, 3)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=self.cfg.lr, total_steps=total,
                                                         pct_start=max(0.1, 2.0 / total))
        self.step = 0
        self.batches: list[toy.Batch] = []

    def run(self, steps: int, progress: Callable[[int, int, float], None] | None = None) -> int:
        """Take up to `steps` more steps (never past max_steps); returns the steps taken so far."""
        cfg, model = self.cfg, self.model
        model.train()
        for _ in range(max(0, min(steps, cfg.max_steps - self.step))):
            if self.step == cfg.short_steps:
                self.batches = []
            if not self.batches:
                self.batches = toy.bucketed_batches(self.short if self.step < cfg.short_steps else self.pairs,
                                                    cfg.batch_size, self.gen)
            b = self.batches.pop()
            logits, _ = model(b.src, b.src_mask, b.tgt)  # (B, T_tgt - 1, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), b.tgt[:, 1:].reshape(-1), ignore_index=0)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            self.opt.step()
            self.sched.step()
            self.step += 1
            if progress:
                progress(self.step, cfg.max_steps, float(loss.detach()))
        return self.step


def train(
    model: nn.Module,
    cfg: TrainConfig,
    progress: Callable[[int, int, float], None] | None = None,
    accuracy: Callable[[nn.Module, list], dict[int, float]] | None = None,
    checkpoint: Callable[[int], None] | None = None,
    checkpoint_at: tuple[int, ...] = (),
) -> TrainResult:
    """Train with teacher forcing and Adam on bucketed batches; deterministic for a given seed. The stop rule reads
    `accuracy(model, pairs)` (by source length): the lab's evaluator unless given (a student release seals it, and
    its notebook passes the student's own). checkpoint(step) hears of each step of `checkpoint_at` the run reaches
    (the steps run in chunks either way: the same numbers)."""
    if accuracy is None:
        from .evaluate import accuracy_by_length as accuracy  # trusted, never the submission's evaluator

    valid = cfg.valid_pairs()
    trainer = Trainer(model, cfg)
    history: list[tuple[int, float, float, float]] = []
    start = time.perf_counter()
    while trainer.step < cfg.max_steps:
        end = trainer.step + cfg.eval_every - trainer.step % cfg.eval_every
        for at in sorted(s for s in checkpoint_at if trainer.step < s <= min(end, cfg.max_steps)):
            trainer.run(at - trainer.step, progress)
            if checkpoint:
                checkpoint(at)
        trainer.run(end - trainer.step, progress)
        acc = accuracy(model, valid)
        history.append((trainer.step, time.perf_counter() - start, acc[cfg.target_len], acc.get(cfg.long_len, 0.0)))
        if cfg.met(acc):
            break
    return TrainResult(trainer.step, time.perf_counter() - start, history)
