"""The grader's own trusted evaluator: greedy decoding and pooled token accuracy by source length."""
from __future__ import annotations

import torch
import torch.nn as nn

from . import toy


@torch.no_grad()
def greedy(model: nn.Module, batch: toy.Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode len(tgt) - 1 tokens from <sos> with the model's own argmax; returns (pred, alpha)."""
    steps = batch.tgt.size(1) - 1
    outputs, (h, c) = model.encoder(batch.src)
    state = (h[-1], c[-1])  # (B, H) each
    y = batch.tgt[:, :1]
    preds, alphas = [], []
    for _ in range(steps):
        logits, state, alpha = model.decoder.forward_step(y, state, outputs, batch.src_mask)
        y = logits.argmax(dim=-1).unsqueeze(1)
        preds.append(y[:, 0])
        alphas.append(alpha)
    return torch.stack(preds, 1), torch.stack(alphas, 1)


@torch.no_grad()
def token_counts(model: nn.Module, batch: toy.Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sentence: (correct real target tokens, real target tokens), pads never counted."""
    pred, _ = greedy(model, batch)
    gold = batch.tgt[:, 1:]
    if pred.shape != gold.shape:  # logits of another shape than (B, V) would broadcast in eq: one guess, many answers
        raise ValueError(f"the predictions have the wrong shape: {tuple(pred.shape)} for targets {tuple(gold.shape)}; "
                         "forward_step's logits must be (B, V)")
    real = gold.ne(0)
    return (pred.eq(gold) & real).sum(1), real.sum(1)


@torch.no_grad()
def accuracy_by_length(
    model: nn.Module, pairs: list[tuple[list[str], list[str]]], batch_size: int = 256
) -> dict[int, float]:
    """Pooled greedy token accuracy for each source length of `pairs`."""
    was_training = model.training
    model.eval()
    acc = {}
    for length, group in toy.by_length(pairs).items():
        hits = total = 0
        for i in range(0, len(group), batch_size):
            batch = toy.encode(group[i : i + batch_size]).to(next(model.parameters()).device)
            correct, real = token_counts(model, batch)
            hits += int(correct.sum())
            total += int(real.sum())
        acc[length] = hits / total
    model.train(was_training)
    return acc


def batch_accuracy_by_length(model: nn.Module, batch: toy.Batch) -> dict[int, float]:
    """Pooled greedy token accuracy by source length for one ready-made padded batch."""
    correct, real = token_counts(model, batch)
    lengths = batch.src_mask.sum(1)
    out = {}
    for n in sorted(set(lengths.tolist())):
        pick = lengths == n
        out[int(n)] = float(correct[pick].sum()) / float(real[pick].sum())
    return out
