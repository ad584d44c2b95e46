"""The GPU check, for a machine with an NVIDIA GPU: the CUDA cases pass inside the jail, a device bug fails them
with a hint, and a training step's time on CUDA against the CPU.

    python bench/gpu.py      # about two minutes; on a machine without CUDA it says so and exits 0

1. grades the reference (quick): every `cuda matches cpu` case runs (not skipped) and passes;
2. grades a device bug (a tensor made on the CPU inside BahdanauAttention.forward): its CUDA case fails with
   a hint, and the device case (a stand-in CUDA device, grader/worker/standin_cuda.py), which runs everywhere, fails too;
3. prints the median seconds per training step of the reference model, B=32, lengths 20..30, CPU vs CUDA.
Exit status 1 if 1 or 2 does not hold. Prints figures; asserts nothing about speed.
"""
from __future__ import annotations

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
sys.path.insert(0, str(ROOT / "bench"))

from bench import calibration, models  # noqa: E402  (bench/bench.py, beside this file)
from grader.lab import train  # noqa: E402
from grader.lab import toy
from grader.runner.schedule import grade  # noqa: E402
from grader.runner.stage import stage  # noqa: E402
from grader.runner.report import as_dict  # noqa: E402
from grader.runner.results import Limits  # noqa: E402

CUDA_CASE = "test_cuda_matches_cpu"
DEVICE_BUG = ('scores = scores.masked_fill(~src_mask, float("-inf"))',
              'scores = (scores + torch.zeros(scores.shape)).masked_fill(~src_mask, float("-inf"))')


def graded(folder: Path, pieces: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="attnlab-gpu-") as tmp:
        return as_dict(grade(submission=stage(folder, Path(tmp)), pieces=pieces, seed="0", limits=Limits(quick=True)))


def cases(report: dict, name: str) -> list[dict]:
    return [c | {"piece": p["name"]} for p in report["pieces"] for c in p["cases"] if c["name"] == name]


def step_seconds(name: str, device: str, repeats: int = 5, steps: int = 20) -> float:
    """Median seconds per training step of one of bench.models() on `device` (synchronised on CUDA)."""
    cfg = train.TrainConfig()
    model = models()[name][0].to(device)
    pairs = [p for p in toy.read_split("train") if 20 <= len(p[0]) <= 30]
    batches = [toy.encode(pairs[i * cfg.batch_size:(i + 1) * cfg.batch_size]) for i in range(steps)]
    batches = [(b.src.to(device), b.src_mask.to(device), b.tgt.to(device)) for b in batches]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for src, mask, tgt in batches:
            logits, _ = model(src, mask, tgt)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=0)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times)


def main() -> int:
    cal = calibration()
    print(f"calibration: {cal['cpu']} ({cal['isa']}, {cal['cores']} cores), 256^3 matmul {cal['mm256_us']:.0f} us "
          f"({cal['gflops']:.0f} GFLOP/s), torch {torch.__version__}")
    if not torch.cuda.is_available():
        print("no CUDA device here: nothing to check (the CUDA cases are skipped on this machine)")
        return 0
    print(f"GPU: {torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}")
    ok = True
    ref = graded(ROOT / "reference", ["encoder", "additive", "luong", "decoder", "evaluation"])
    for c in cases(ref, CUDA_CASE):
        state = "skipped" if c["skipped"] else "passed" if c["passed"] else f"FAILED: {c['message']}"
        print(f"reference {c['piece']:<10} {CUDA_CASE}: {state}")
        ok &= c["passed"] and not c["skipped"]
    missing = {g for p in ref["pieces"] for g in p.get("jail_missing", [])}
    print(f"jail layers missing: {', '.join(sorted(missing)) or 'none'}")
    with tempfile.TemporaryDirectory(prefix="attnlab-gpu-bug-") as tmp:
        bug = Path(tmp) / "bug"
        shutil.copytree(ROOT / "reference", bug)
        text = (bug / "additive.py").read_text()
        assert DEVICE_BUG[0] in text, "the device bug's edit target moved; update bench/gpu.py"
        (bug / "additive.py").write_text(text.replace(*DEVICE_BUG))
        report = graded(bug, ["additive"])
    for name in (CUDA_CASE, "test_tensors_follow_the_input_device"):
        for c in cases(report, name):
            print(f"device bug additive {name}: {'passed (WRONG)' if c['passed'] else 'failed'}: {c['message']}")
            ok &= not c["passed"] and bool(c["message"])
    for name in ("Bahdanau", "Luong"):
        cpu, cuda = step_seconds(name, "cpu"), step_seconds(name, "cuda")
        print(f"{name} training step (B=32, lengths 20..30): CPU {cpu * 1000:.1f} ms, CUDA {cuda * 1000:.1f} ms "
              f"({cpu / cuda:.1f}x)")
    print("GPU check: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
