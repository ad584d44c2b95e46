"""Where the graded training cases could start, and how few steps they could take: one model's run from scratch
(as `grade artifacts` trains it), a checkpoint every STEP steps, and from each the graded schedule over a few
budgets.

    python bench/warm_sweep.py bahdanau --from 1000 --to 1600 --steps 100 120
    python bench/warm_sweep.py luong --from 800 --to 1400 --steps 100 120 --save /tmp/ckpts

Each row: a checkpoint's own test accuracy at length 30 (what a decoder that cannot learn keeps: the case asks
0.90, so it must stay well below), then the reference's after each budget, and what cannot learn (an attention
whose scores are ignored; for Bahdanau also a model where only the output layer learns) after the largest
budget. One thread, seeded: the numbers are those of this CPU's float rounding (they move between CPUs).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import io
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader import REFERENCE  # noqa: E402
from grader.judge.reference_code import load_reference  # noqa: E402
from grader.lab import evaluate, toy, train  # noqa: E402
from grader.lab.luong_model import Seq2SeqLuong  # noqa: E402


class Uniform(nn.Module):
    """Attention whose scores are not used: the mean of the real encoder states."""

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        mask = torch.ones(encoder_outputs.shape[:2], dtype=torch.bool) if src_mask is None else src_mask
        alpha = mask.float() / mask.sum(-1, keepdim=True)  # (B, T_src)
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1), alpha


def make(ref, kind: str, cfg: train.TrainConfig) -> nn.Module:
    torch.manual_seed(cfg.seed)
    dims = (len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    if kind == "luong":
        return Seq2SeqLuong(*dims, ref.luong.LuongDotAttention())
    return ref.decoder.Seq2SeqAttn(*dims)


def acc30(model: nn.Module, test30: list) -> float:
    return evaluate.accuracy_by_length(model, test30)[30]


def graded(model: nn.Module, steps: int, lr: float, seed: int) -> None:
    cfg = dataclasses.replace(train.graded(), max_steps=steps, eval_every=steps, lr=lr, seed=seed)
    trainer = train.Trainer(model, cfg)
    trainer.run(steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["bahdanau", "luong"])
    ap.add_argument("--from", dest="first", type=int, default=1000)
    ap.add_argument("--to", dest="last", type=int, default=1600)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--steps", type=int, nargs="+", default=[100, 120])
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0, help="the graded schedule's seed (its batches' order)")
    ap.add_argument("--save", type=Path, default=None, help="write each checkpoint here as <kind>_<step>.pt")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ref = load_reference(REFERENCE)
    run_cfg = train.luong() if args.kind == "luong" else train.TrainConfig()
    model = make(ref, args.kind, run_cfg)
    trainer = train.Trainer(model, run_cfg)
    test30 = [p for p in toy.read_split("test") if len(p[0]) == 30]
    print(f"{args.kind}: graded schedule Adam {args.lr}, seed {args.seed}; budgets {args.steps}")
    print("| checkpoint | alone | " + " | ".join(f"after {n}" for n in args.steps)
          + f" | uniform after {max(args.steps)} | output layer only after {max(args.steps)} |")
    print("|---|---|" + "---|" * len(args.steps) + "---|---|")
    t0 = time.perf_counter()
    for step in range(args.first, args.last + 1, args.every):
        trainer.run(step - trainer.step)
        state = copy.deepcopy(model.state_dict())
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            torch.save(state, buf)
            (args.save / f"{args.kind}_{step}.pt").write_bytes(buf.getvalue())
        cells = [f"{acc30(model, test30):.3f}"]
        for n in args.steps:
            m = make(ref, args.kind, run_cfg)
            m.load_state_dict(state)
            graded(m, n, args.lr, args.seed)
            cells.append(f"{acc30(m, test30):.3f}")
        m = make(ref, args.kind, run_cfg)
        m.load_state_dict(state)
        m.decoder.attn = Uniform()  # after the load: the trained scoring parameters go unused
        graded(m, max(args.steps), args.lr, args.seed)
        cells.append(f"{acc30(m, test30):.3f}")
        if args.kind == "bahdanau":
            m = make(ref, args.kind, run_cfg)
            m.load_state_dict(state)
            for name, p in m.named_parameters():
                p.requires_grad_(name.startswith("decoder.head."))
            graded(m, max(args.steps), args.lr, args.seed)
            cells.append(f"{acc30(m, test30):.3f}")
        else:
            cells.append("-")
        print(f"| {step} | " + " | ".join(cells) + f" |   ({time.perf_counter() - t0:.0f} s)", flush=True)
        model.train()


if __name__ == "__main__":
    main()
