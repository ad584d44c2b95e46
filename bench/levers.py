"""Measure the training levers one by one: steps to the stop rule and test accuracy for each variant.

    python bench/levers.py               # every lever, two runs at a time (about 25 minutes on 2 cores)
    python bench/levers.py stop95 b16    # only the named ones

Each run is the grader's loop (`train.train`) on the reference model with one change from the
defaults. Step counts do not depend on the machine (one thread, seeded); seconds do, and two runs
share the machine, so compare seconds within one call only and read step costs from bench.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRADED = {"long_acc": 0.0}  # the graded case's stop rule reads length 30 only

# name: (what changes, TrainConfig overrides, "all" where every parameter starts from the graded warm start)
LEVERS: dict[str, tuple[str, dict, str]] = {
    "both targets": ("defaults: stop at valid 0.98 at 30 and 0.95 at 40", {}, ""),
    "both targets, seed 1": ("the same, seed 1", {"seed": 1}, ""),
    "both targets, seed 2": ("the same, seed 2", {"seed": 2}, ""),
    "graded 0.98": ("graded stop rule as before: valid 0.98 at 30", {**GRADED}, ""),
    "stop95": ("graded stop rule: valid 0.95 at 30", {**GRADED, "target_acc": 0.95}, ""),
    "stop95, seed 1": ("the same, seed 1", {**GRADED, "target_acc": 0.95, "seed": 1}, ""),
    "stop95, seed 2": ("the same, seed 2", {**GRADED, "target_acc": 0.95, "seed": 2}, ""),
    "b16": ("stop95 with B=16", {**GRADED, "target_acc": 0.95, "batch_size": 16}, ""),
    "b64 1500": ("B=64, one-cycle over 1500 steps", {"batch_size": 64, "max_steps": 1500}, ""),
    "cycle 1500": ("one-cycle over 1500 steps", {"max_steps": 1500}, ""),
    "cycle 1200": ("one-cycle over 1200 steps", {"max_steps": 1200}, ""),
    "cycle 1400": ("one-cycle over 1400 steps", {"max_steps": 1400}, ""),
    "cycle 1200 lr 0.03": ("one-cycle over 1200 steps at Adam 0.03", {"max_steps": 1200, "lr": 0.03}, ""),
    "cycle 1000 lr 0.03": ("one-cycle over 1000 steps at Adam 0.03", {"max_steps": 1000, "lr": 0.03}, ""),
    "cycle 1200 b0.95": ("one-cycle over 1200 steps, betas (0.9, 0.95)", {"max_steps": 1200, "betas": (0.9, 0.95)}, ""),
    "h48": ("H=48", {"hidden_dim": 48}, ""),
    "h128": ("H=128", {"hidden_dim": 128}, ""),
    # from the graded cases' warm start: every parameter at step train.WARM_STEP['bahdanau'] of the run from scratch
    "graded": ("train.graded(): from the checkpoint, Adam 0.005, one cycle over GRADED_STEPS['bahdanau'], no early "
               "stop", {}, "all"),
    "graded, seed 1": ("the same, seed 1", {"seed": 1}, "all"),
    "graded, seed 2": ("the same, seed 2", {"seed": 2}, "all"),
    "graded, seed 3": ("the same, seed 3", {"seed": 3}, "all"),
    "graded 150": ("the same, one cycle over 150", {"max_steps": 150, "eval_every": 150}, "all"),
    "graded lr 0.01": ("the same at Adam 0.01", {"lr": 0.01}, "all"),
    "graded lr 0.003": ("the same at Adam 0.003", {"lr": 0.003}, "all"),
    "graded, untrained": ("the checkpoint as it is: what a decoder that cannot learn keeps",
                          {"max_steps": 1, "eval_every": 1, "lr": 1e-12}, "all"),
    # Luong's model (grader/lab/luong_model.py) from scratch: train.luong() with one change
    "luong": ("train.luong(): Adam 0.01, one cycle over 1800 steps", {}, "luong"),
    "luong 900": ("one cycle over 900 steps", {"max_steps": 900}, "luong"),
    "luong 900 lr 0.015": ("one cycle over 900 steps at Adam 0.015", {"max_steps": 900, "lr": 0.015}, "luong"),
    "luong 1100": ("one cycle over 1100 steps", {"max_steps": 1100}, "luong"),
}


def one(name: str) -> dict:
    """Train one variant in this process (called through a child, so two run at once)."""
    import torch

    sys.path.insert(0, str(ROOT))
    from grader.lab import artifacts
    from grader.lab import evaluate
    from grader.lab import toy
    from grader.lab import train
    from grader.judge.reference_code import load_reference

    _, over, start = LEVERS[name]
    # the warm-started levers vary the graded schedule; the others the full one
    base = {"all": train.graded(), "luong": train.luong()}.get(start, train.TrainConfig())
    cfg = dataclasses.replace(base, **over)
    ref = load_reference(ROOT / "reference")
    torch.manual_seed(cfg.seed)
    sizes = (len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    if start == "luong":
        from grader.lab.luong_model import Seq2SeqLuong

        model = Seq2SeqLuong(*sizes, ref.luong.LuongDotAttention())
    else:
        model = ref.decoder.Seq2SeqAttn(*sizes)
    if start == "all":
        model.load_state_dict(artifacts.load_warm_start())  # the reference's run from scratch, WARM_STEP steps in
    result = train.train(model, cfg)
    acc = evaluate.accuracy_by_length(model, [p for p in toy.read_split("test") if len(p[0]) in (30, 40)])
    return {"name": name, "steps": result.steps, "seconds": round(result.seconds, 1),
            "s_per_step": round(result.seconds / result.steps, 4), "test30": round(acc[30], 3), "test40": round(acc[40], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"levers to run (default: all): {', '.join(LEVERS)}")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    names = args.names or list(LEVERS)
    unknown = [n for n in names if n not in LEVERS]
    if unknown:
        ap.error(f"unknown lever(s): {', '.join(unknown)}")

    def child(name: str) -> dict:
        out = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"name": name, "error": out.stderr[-300:]}

    print("| lever | what changes | steps | seconds (2 runs share the CPU) | test 30 / 40 |\n|---|---|---|---|---|")
    with ThreadPoolExecutor(2) as pool:
        for r in pool.map(child, names):
            if "error" in r:
                print(f"| {r['name']} | failed: {r['error']!r} | | | |")
            else:
                print(f"| {r['name']} | {LEVERS[r['name']][0]} | {r['steps']} | {r['seconds']} | "
                      f"{r['test30']:.3f} / {r['test40']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
