"""Compare two commits' grading time, interleaved so that load and CPU drift fall on both alike.

    python bench/interleave.py d06e8c5 HEAD            # 3 rounds of: a full grade of reference/ at A, then at B
    python bench/interleave.py d06e8c5 HEAD --rounds 5 --quick
    python bench/interleave.py a45cc35 HEAD --rounds 2 --plots    # `grade --plots`: the grade, then both models
                                                                  # trained from scratch (minutes a round)

Each commit is checked out once into a temporary worktree and graded there by its own grader
(`python -m grader --submission reference --format json`, run from the worktree), A then B then A then B.
Prints the calibration line first (bench.py's), then each run's wall time, the medians and B's change
against A, and whether the two commits' reports agree once timings are left out (the same cases, points and
messages). Nothing here is asserted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(where), rev], check=True)
    return where


def calibration_line() -> str:
    """bench.py's calibration, measured now, as the one line every interleaved benchmark prints first."""
    from bench import calibration  # bench/bench.py's, so the line reads as its does

    cal = calibration()
    return "calibration: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in cal.items())


def graded(tree: Path, folder: str, quick: bool, plots: bool = False) -> tuple[float, dict]:
    """One grade of `folder` (relative to the worktree) by the worktree's grader: (seconds, report without times).
    `plots`: `grade --plots`, whose report goes to a file (its plot messages go to standard output)."""
    with tempfile.TemporaryDirectory(prefix="attnlab-run-") as run:
        out = Path(run) / "report.json"
        argv = [sys.executable, "-m", "grader", "--submission", folder, "--format", "json",
                *(["--quick"] if quick else []), *(["--plots", str(Path(run) / "plots"), "--out", str(out)] if plots else [])]
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, timeout=1800)
        seconds = time.perf_counter() - t0
        if done.returncode not in (0, 1) or (plots and "plots written" not in done.stdout):
            raise SystemExit(f"grading failed in {tree}: {(done.stdout + done.stderr)[-2000:]}")
        report = json.loads(out.read_text() if plots else done.stdout)
    return seconds, strip_times(report)


def strip_times(value):
    """The report without what varies run to run (seconds, durations)."""
    if isinstance(value, dict):
        return {k: strip_times(v) for k, v in value.items() if k not in ("seconds", "duration", "time")}
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def difference(a, b, path: str = "") -> str:
    """Where two reports first differ, and how: '' where they agree."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}/{k}: only in {'the second' if k in b else 'the first'}"
            found = difference(a[k], b[k], f"{path}/{k}")
            if found:
                return found
        return ""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := difference(x, y, f"{path}/{i}"))), "")
    return "" if a == b else f"{path}: {str(a)[:160]!r} vs {str(b)[:160]!r}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="grade without the two training cases")
    ap.add_argument("--plots", action="store_true", help="`grade --plots`: also train both models from scratch")
    args = ap.parse_args()
    print(calibration_line())
    with tempfile.TemporaryDirectory(prefix="attnlab-interleave-") as tmp:
        trees = {rev: worktree(rev, Path(tmp) / f"t{i}") for i, rev in enumerate((args.a, args.b))}
        try:
            times: dict[str, list[float]] = {rev: [] for rev in trees}
            reports: dict[str, dict] = {}
            for r in range(args.rounds):
                for rev, tree in trees.items():
                    seconds, report = graded(tree, "reference", args.quick, args.plots)
                    times[rev].append(seconds)
                    reports.setdefault(rev, report)
                    print(f"round {r + 1}: {rev:>10} {seconds:7.1f} s", flush=True)
            stubs = {rev: graded(tree, "exercises", True)[1] for rev, tree in trees.items()}
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    med = {rev: statistics.median(t) for rev, t in times.items()}
    print(f"median: {args.a} {med[args.a]:.1f} s, {args.b} {med[args.b]:.1f} s "
          f"({(med[args.b] / med[args.a] - 1) * 100:+.1f} %)")
    print(f"reference report the same: {reports[args.a] == reports[args.b]}; "
          f"stubs report the same: {stubs[args.a] == stubs[args.b]}")
    for name, pair in (("reference", reports), ("stubs", stubs)):
        if pair[args.a] != pair[args.b]:
            print(f"  {name}: first difference at {difference(pair[args.a], pair[args.b])}")


if __name__ == "__main__":
    main()
