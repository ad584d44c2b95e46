"""Benchmark the lab on this machine: time-to-accuracy, the length curve, step cost and grading time.

    python bench/bench.py              # everything (4 min 47 s on a 2-core AMD EPYC, docs/performance.md)
    python bench/bench.py --skip-train # only step cost, grading time and batch rate
    python bench/bench.py --steps-only # the calibration line and the step costs alone (17 s there), for repeats

Prints one markdown table per figure; nothing here is asserted (tests stay free of wall-clock checks).
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.lab import train  # noqa: E402
from grader.lab import evaluate
from grader.lab import toy
from grader.runner.schedule import grade  # noqa: E402
from grader.runner.stage import stage  # noqa: E402
from grader.core.pieces import PIECES  # noqa: E402
from grader.runner.report import as_dict  # noqa: E402
from grader.runner.results import Limits  # noqa: E402
from grader.judge.reference_code import load_reference  # noqa: E402

LENGTHS = (1, 5, 10, 15, 20, 30, 40)


def calibration(repeats: int = 50) -> dict:
    """Micro-timings that place this CPU among others (one thread): figures from two machines compare
    through these (docs/performance.md lists the machines measured so far)."""
    torch.set_num_threads(1)
    x = torch.randn(32, 25, 64)
    a, b = torch.randn(32, 128), torch.randn(128, 256)
    big = torch.randn(256, 256)

    def us(fn, n: int = repeats) -> float:
        fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e6

    mm256 = us(lambda: big @ big, 20)
    flags = set()
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "unknown CPU":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    import os

    return {"cpu": cpu, "isa": isa, "cores": os.cpu_count(), "sigmoid_us": us(lambda: torch.sigmoid(x)),
            "tanh_us": us(lambda: torch.tanh(x)), "exp_us": us(lambda: torch.exp(x)), "mm_us": us(lambda: a @ b),
            "mm256_us": mm256, "gflops": 2 * 256**3 / (mm256 * 1e-6) / 1e9}


def models() -> dict[str, tuple[torch.nn.Module, train.TrainConfig]]:
    """Each model of the comparison, freshly seeded, with the training schedule it gets."""
    ref = load_reference(ROOT / "reference")
    from grader.lab.baseline import Seq2SeqBaseline
    from grader.lab.luong_model import Seq2SeqLuong

    cfg = train.TrainConfig()
    sizes = (len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    makers = {
        "Bahdanau": (lambda: ref.decoder.Seq2SeqAttn(*sizes), cfg),
        "Luong": (lambda: Seq2SeqLuong(*sizes, ref.luong.LuongDotAttention()), train.luong()),
        "Luong drop-in": (lambda: ref.decoder.Seq2SeqAttn(*sizes), cfg),
        "no attention": (lambda: Seq2SeqBaseline(*sizes), cfg),
    }
    out = {}
    for name, (make, run_cfg) in makers.items():
        torch.manual_seed(run_cfg.seed)
        model = make()
        if name == "Luong drop-in":  # the lesson's swap: the dot score in the Bahdanau decoder, query s_{t-1}
            model.decoder.attn = ref.luong.LuongDotAttention()
        out[name] = (model, run_cfg)
    return out


def curves() -> tuple[dict, dict]:
    """Train each model with the grader's loop and its schedule; accuracy by length on the test split."""
    test = toy.read_split("test")
    acc, runs = {}, {}
    for name, (model, cfg) in models().items():
        result = train.train(model, cfg)
        by_len = evaluate.accuracy_by_length(model, test)
        acc[name] = {n: by_len[n] for n in LENGTHS}
        runs[name] = {"steps": result.steps, "seconds": round(result.seconds, 1), "max_steps": cfg.max_steps,
                      "reached_30": next(((s, round(t, 1)) for s, t, a30, _ in result.history
                                          if a30 >= cfg.target_acc), None),
                      "reached": next(((s, round(t, 1)) for s, t, a30, a40 in result.history
                                       if cfg.met({cfg.target_len: a30, cfg.long_len: a40})), None)}
    return acc, runs


def graded_training() -> dict:
    """The graded training cases' schedule in-process, seed 0, from their warm starts (the cases add decoding)."""
    from grader.lab import artifacts

    out = {}
    for name, kind in (("Bahdanau", "bahdanau"), ("Luong", "luong")):
        cfg = train.graded(kind)
        model = models()[name][0]  # seeded as the case seeds it (seed 0)
        model.load_state_dict(artifacts.load_warm_start(kind))
        result = train.train(model, cfg)
        acc = evaluate.accuracy_by_length(model, [p for p in toy.read_split("test") if len(p[0]) == 30])
        out[name] = {"steps": result.steps, "seconds": round(result.seconds, 1), "test30": acc[30]}
    return out


def step_flops(mm256_us: float) -> dict:
    """FLOPs of one training step (B=32, the first lengths-20..30 batch) and the time they need at the
    measured 256^3 matmul rate: the physical floor of a step on this CPU."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = train.TrainConfig()
    model = models()["Bahdanau"][0]
    pairs = [p for p in toy.read_split("train") if 20 <= len(p[0]) <= 30]
    b = toy.encode(pairs[: cfg.batch_size])
    with FlopCounterMode(display=False) as counter:
        logits, _ = model(b.src, b.src_mask, b.tgt)
        F.cross_entropy(logits.reshape(-1, logits.size(-1)), b.tgt[:, 1:].reshape(-1), ignore_index=0).backward()
    B, T = b.src.shape
    # the counter does not see the encoder's fused LSTM kernel: 4 gates of (E + H) x H, forward and twice that back
    lstm = 3 * 2 * B * T * 4 * cfg.hidden_dim * (cfg.embed_dim + cfg.hidden_dim)
    flops = counter.get_total_flops() + lstm
    return {"mflop": flops / 1e6, "batch": [B, T, b.tgt.size(1)], "floor_ms": flops / (2 * 256**3 / (mm256_us * 1e-6)) * 1e3}


def step_seconds(repeats: int = 5, steps: int = 20) -> dict[str, float]:
    """Median seconds per training step (the grader's batch size, lengths 20..30) for each model, same batches."""
    cfg = train.TrainConfig()
    torch.set_num_threads(cfg.threads)
    pairs = [p for p in toy.read_split("train") if 20 <= len(p[0]) <= 30]
    batches = [toy.encode(pairs[i * cfg.batch_size:(i + 1) * cfg.batch_size]) for i in range(steps)]
    out = {}
    for name, (model, _) in models().items():
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for b in batches:
                logits, _ = model(b.src, b.src_mask, b.tgt)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), b.tgt[:, 1:].reshape(-1), ignore_index=0)
                opt.zero_grad()
                loss.backward()
                opt.step()
            times.append((time.perf_counter() - t0) / steps)
        out[name] = statistics.median(times)
    return out


def attention_seconds(repeats: int = 5, sentences: int = 20, steps: int = 25) -> dict[str, float]:
    """Median seconds of attention per decoder step, forward and backward, alone (B=32, T_src=25, H=64)."""
    ref = load_reference(ROOT / "reference")
    cfg = train.TrainConfig()
    torch.set_num_threads(cfg.threads)
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(cfg.batch_size, 25, cfg.hidden_dim, generator=gen, requires_grad=True)  # (B, T_src, H)
    states = torch.randn(steps, cfg.batch_size, cfg.hidden_dim, generator=gen)  # (steps, B, H)
    mask = torch.ones(cfg.batch_size, 25, dtype=torch.bool)
    out = {}
    for name, attn in (("Bahdanau", ref.additive.BahdanauAttention(cfg.hidden_dim)), ("Luong", ref.luong.LuongDotAttention())):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(sentences):  # like training: fresh encoder states, one backward per sentence batch
                enc = base * 1.0  # (B, T_src, H)
                total = sum(attn(enc, s, mask)[0].sum() for s in states)
                total.backward()
            times.append((time.perf_counter() - t0) / (sentences * steps))
        out[name] = statistics.median(times)
    return out


def grading(repeats: int) -> dict:
    """Full `grade` of the reference: wall time, per piece, the overhead over the cases' own time, and where the
    wall time goes: the unit phase (its first piece waits for the first fork servers), then the training phase,
    and in each training case its steps (as the case's progress reports them) against its decoding and start."""
    walls, pieces, compute, phases = [], {}, [], []
    for _ in range(repeats):
        marks: dict[str, float] = {}
        steps: dict[str, tuple[int, float]] = {}
        t0 = time.perf_counter()

        def progress(piece: str, finished: bool = False) -> None:
            marks[f"{piece} {'end' if finished else 'start'}"] = time.perf_counter() - t0

        def training(piece: str, event: dict) -> None:
            steps[piece] = (int(event["step"]), float(event["seconds"]))

        with tempfile.TemporaryDirectory() as tmp:
            sub = stage(ROOT / "reference", Path(tmp))
            t0 = time.perf_counter()
            runs = grade(submission=sub, pieces=list(PIECES), seed="0", limits=Limits(), progress=progress,
                         training=training)
            walls.append(time.perf_counter() - t0)
        report = as_dict(runs)
        assert report["score"] == report["max_score"], "the reference must earn full marks"
        for p in report["pieces"]:
            pieces.setdefault(p["name"], []).append(p["seconds"])
        compute.append(sum(c["duration"] for p in report["pieces"] for c in p["cases"]))
        slow = {p["name"]: next(c["duration"] for c in p["cases"] if c["name"].startswith("test_trained"))
                for p in report["pieces"] if p["name"] in steps}
        units_end = max(v for k, v in marks.items() if k.endswith(" end") and k.split()[0] not in steps)
        first = min((v, k.split()[0]) for k, v in marks.items() if k.endswith(" start"))[1]
        phases.append({f"first piece, {first} (the fork servers' start included)": marks[f"{first} end"],
                       "unit phase": units_end, "training phase": walls[-1] - units_end,
                       **{f"{k}: {steps[k][0]} steps": steps[k][1] for k in steps},
                       **{f"{k}: the case less its steps (start, load, decoding)": slow[k] - steps[k][1] for k in steps}})
    return {"wall": statistics.median(walls), "pieces": {k: statistics.median(v) for k, v in pieces.items()},
            "compute": statistics.median(compute), "overhead": statistics.median(w / c for w, c in zip(walls, compute)),
            "phases": {k: statistics.median(ph[k] for ph in phases) for k in phases[0]}}


def worker_start(n: int = 30) -> dict:
    """What the jail costs a piece: a jailed worker forked, confined and loaded with a piece, then closed."""
    from grader.judge.workers import Output, WorkerServer
    from grader.judge.sources import student_sources
    from grader.judge.remote import CaseHandle, PieceWorker
    from grader.judge.reference_code import ORDER

    server = WorkerServer()
    sources = student_sources(ROOT / "reference", ROOT / "reference", "decoder", ORDER)
    times, jail = [], []
    try:
        for i in range(n + 1):
            t0 = time.perf_counter()
            piece = PieceWorker(server, sources, "decoder", "decoder.py", Output(), 6.0, 600)
            sub = CaseHandle(piece, i, time.monotonic() + 120)
            sub.seed_worker(i)
            piece.close()
            if i:  # the first waits for the server to import torch
                times.append(time.perf_counter() - t0)
            jail = sub.jail
    finally:
        server.close()
    return {"seconds": statistics.median(times), "missing": jail}


def batch_rate(n: int = 12) -> float:
    """Submissions per minute for `grade batch --quick` over n submissions (half reference, half stubs)."""
    from grader.verbs import batch

    with tempfile.TemporaryDirectory() as tmp:
        subs = []
        for i in range(n):
            dest = Path(tmp) / f"student{i:02d}"
            shutil.copytree(ROOT / ("reference" if i % 2 == 0 else "exercises"), dest)
            subs.append(dest)
        t0 = time.perf_counter()
        batch.main(submissions=subs, out=Path(tmp) / "grades.csv", reports=None, jobs=batch.default_jobs(), seed="0",
                   limits=Limits(quick=True), progress=False)
        return n / (time.perf_counter() - t0) * 60


def versus(v: float, base: float) -> str:
    """'12% faster' or '6% slower' than base."""
    change = (1 - v / base) * 100
    return f"{abs(change):.0f}% {'faster' if change >= 0 else 'slower'}"


def table(rows: list[list[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-train", action="store_true", help="skip the three training runs")
    ap.add_argument("--repeats", type=int, default=3, help="full grades to take the median of")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--steps-only", action="store_true",
                    help="only the calibration line, seconds per training step and attention alone: cheap to repeat, "
                         "so a figure comes with its spread")
    args = ap.parse_args()
    figures: dict = {"torch": torch.__version__, "threads": train.TrainConfig().threads}
    c = calibration()
    figures["calibration"] = c
    print(f"calibration: {c['cpu']} ({c['isa']}, {c['cores']} cores), torch {torch.__version__}, one thread: "
          f"sigmoid (32,25,64) {c['sigmoid_us']:.0f} us, tanh {c['tanh_us']:.0f} us, exp {c['exp_us']:.0f} us; "
          f"(32x128)(128x256) matmul {c['mm_us']:.0f} us; 256^3 matmul {c['mm256_us'] / 1000:.2f} ms "
          f"({c['gflops']:.0f} GFLOP/s)\n")
    if not args.skip_train and not args.steps_only:
        acc, runs = curves()
        figures.update(accuracy=acc, training=runs)
        print("## Training to the targets (grader's loop; it stops once both validation targets are met)\n")
        print(table([["model", "steps run (of)", "seconds", "valid >= 0.98 at 30 (step, s)", "and >= 0.95 at 40 (step, s)"]]
                    + [[k, f"{v['steps']} ({v['max_steps']})", str(v["seconds"]), str(v["reached_30"] or "not reached"),
                        str(v["reached"] or "not reached")] for k, v in runs.items()]))
        print("\n## Greedy token accuracy by source length (test split, same budget)\n")
        print(table([["model", *map(str, LENGTHS)]] + [[k, *(f"{v[n]:.3f}" for n in LENGTHS)] for k, v in acc.items()]))
        g = graded_training()
        figures["graded_training"] = g
        print(f"\n## The graded training cases' schedule, in-process (train.graded(kind), from the checkpoints at "
              f"steps {train.WARM_STEP}, seed 0)\n")
        print(table([["case", "steps", "seconds", "test accuracy at 30 (the case asks 0.90)"]]
                    + [[k, str(v["steps"]), str(v["seconds"]), f"{v['test30']:.3f}"] for k, v in g.items()]))
    steps = step_seconds()
    figures["step_seconds"] = steps
    print(f"\n## Seconds per training step (B={train.TrainConfig().batch_size}, source lengths 20-30, "
          "median of 5 x 20 steps)\n")
    print(table([["model", "s/step", "vs Bahdanau"]]
                + [[k, f"{v:.4f}", versus(v, steps["Bahdanau"]) if k != "Bahdanau" else "-"]
                   for k, v in steps.items()]))
    fl = step_flops(c["mm256_us"])
    figures["step_flops"] = fl
    print(f"\nOne Bahdanau step (B, T_src, T_tgt = {fl['batch']}): {fl['mflop']:.0f} MFLOP, {fl['floor_ms']:.1f} ms at this "
          f"CPU's 256^3 matmul rate: the floor a step could reach if every FLOP ran at that rate. A measured step "
          f"({steps['Bahdanau'] * 1000:.1f} ms) is {steps['Bahdanau'] * 1000 / fl['floor_ms']:.1f}x that floor.")
    attn = attention_seconds()
    figures["attention_seconds"] = attn
    print("\n## Attention alone per decoder step, forward + backward (B=32, T_src=25, median of 5 x 500 steps)\n")
    print(table([["attention", "microseconds", "vs Bahdanau"]]
                + [[k, f"{v * 1e6:.0f}", versus(v, attn["Bahdanau"]) if k != "Bahdanau" else "-"]
                   for k, v in attn.items()]))
    if args.steps_only:
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
        return
    w = worker_start()
    figures["worker_start"] = w
    print(f"\n## A jailed worker (one per piece): fork, jail, load the piece, close (median of 30)\n\n"
          f"{w['seconds'] * 1000:.1f} ms; layers this machine lacks: {', '.join(w['missing']) or 'none'}")
    g = grading(args.repeats)
    figures["grade"] = g
    print(f"\n## `grade` on the reference (median of {args.repeats})\n")
    print(table([["piece", "seconds"]] + [[k, f"{v:.1f}"] for k, v in g["pieces"].items()]
                + [["**total wall**", f"{g['wall']:.1f}"], ["cases' own time", f"{g['compute']:.1f}"],
                   ["overhead (wall / cases)", f"{g['overhead']:.2f}x"]]))
    print("\nWhere the wall time goes (median; the phases run one after the other, the two training cases side by "
          "side):\n")
    print(table([["part", "seconds", "share of the wall"]]
                + [[k, f"{v:.2f}", f"{v / g['wall']:.0%}"] for k, v in g["phases"].items()]))
    rate = batch_rate()
    figures["batch_per_minute"] = rate
    print(f"\n## Batch regrade, quick mode\n\n{rate:.1f} submissions a minute")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
