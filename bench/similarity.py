"""The similarity report's time over a made-up class, two commits interleaved (the merge's largest cost).

    python bench/similarity.py d3bc0ab HEAD                   # 1,000 students, 2 rounds of A then B
    python bench/similarity.py d3bc0ab HEAD --students 300 --rounds 3

The class is made once, by this checkout's bench/regrade.py (each piece one of the tests' solutions with names
changed, lines dropped and added at random, a tenth untouched stubs), and each commit's own
`grader.regrade.similarity.report` reads it from a worktree of its own, A then B then A then B. B also runs with the
reference as a known source, as the regrade calls it, where B knows of known sources. Prints the calibration line
first (bench.py's), then each run's wall time and the medians. Nothing here is asserted.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

RUN = """
import sys, time
from pathlib import Path
import grader.regrade.similarity as similarity
assert Path(similarity.__file__).is_relative_to(Path.cwd()), similarity.__file__
kwargs = {}
if sys.argv[3] == "known":
    from grader.regrade import similarity_input
    kwargs["known"] = similarity_input.reference()
t0 = time.perf_counter()
similarity.report(Path(sys.argv[1]), Path(sys.argv[2]), **kwargs)
print(time.perf_counter() - t0)
"""


def timed(tree: Path, code: Path, out: Path, known: bool) -> float:
    done = subprocess.run([sys.executable, "-c", RUN, str(code), str(out), "known" if known else "-"], cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode:
        raise SystemExit(f"the report failed in {tree}: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--students", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    opts = ap.parse_args()
    from interleave import calibration_line, worktree  # bench/interleave.py
    from regrade import made_up_class  # bench/regrade.py

    print(calibration_line())
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="attnlab-similarity-") as tmp:
        tmp_path = Path(tmp)
        code = made_up_class(tmp_path / "code", opts.students)
        trees = {name: worktree(rev, tmp_path / name) for name, rev in (("A", opts.a), ("B", opts.b))}
        known_b = (trees["B"] / "grader" / "regrade" / "similarity_input.py").is_file()
        runs = [("A", opts.a, False), ("B", opts.b, False)] + ([("B", f"{opts.b} + reference", True)] if known_b else [])
        try:
            for r in range(opts.rounds):
                for name, label, known in runs:
                    seconds = timed(trees[name], code, tmp_path / "report.html", known)
                    times.setdefault(label, []).append(seconds)
                    print(f"round {r + 1}: {label}: {seconds:.1f} s", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"\n{opts.students} made-up students, median of {opts.rounds}:")
    for label, got in times.items():
        print(f"- {label}: {statistics.median(got):.1f} s")


if __name__ == "__main__":
    main()
