"""What a class regrade costs, and how many shards a class needs to finish in a given time.

    python bench/regrade.py                    # the model, two shards side by side, the plan (about 10 minutes)
    python bench/regrade.py --students 3       # solved students per shard (more: steadier figures, longer)
    python bench/regrade.py --plan-only F.json # the plan again from an earlier run's --json figures
    python bench/regrade.py --rate-only        # only `grade batch --quick`'s rate (12 submissions)

1. The model. A shard of n students takes  T(n) = a + b * n  once its runner is set up. b is a student's cost
   to a whole machine whose every core grades (`grade batch -j CORES`, as a runner grades), a what a batch
   costs besides: the slope and intercept of two whole-machine batches of solved students (2 and
   2 x --students). Every case runs for a solved student, so b bounds a real class's (failed unit cases
   skip the training cases).
2. The check. A class of 2 x --students in two shards run side by side, each pinned to a core of its own
   (half this machine, as each shard of a matrix has a runner's cores): each shard's time against
   a + 2 b n, its share of the machine.
3. The plan. From a and b times the runner factor (a 2-core AVX2 runner's training step costs 2-3.5x a
   fast CPU's: --factor, default the worst), the clone job's and each job's setup time (installing torch,
   the project and the class artifact: assumed, --clone-minutes and --setup-minutes, since this machine
   has no runner) and the similarity report's measured time for 1,000 made-up students, the shards a
   class needs.

Prints markdown; nothing is asserted. Quote no figure without the calibration line above it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench import batch_rate, calibration, table  # noqa: E402

GRADE = [sys.executable, "-m", "grader"]


def cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def make_class(where: Path, n: int, unreadable: int = 0) -> Path:
    """n solved repositories (the reference as exercises/) and `unreadable` broken zips."""
    for i in range(n):
        shutil.copytree(ROOT / "reference", where / f"attention-lab-s{i:03d}" / "exercises")
    for i in range(unreadable):
        where.mkdir(parents=True, exist_ok=True)
        (where / f"broken{i}.zip").write_text("not a zip")
    return where


def start(args: list[str], core: int | None, log: Path, jobs: int = 1) -> tuple[subprocess.Popen, float]:
    """`grade batch ARGS` on one core (its workers inherit the affinity)."""
    pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None and hasattr(os, "sched_setaffinity") else None
    env = {**os.environ, "ATTNLAB_SEED": "bench"}
    proc = subprocess.Popen([*GRADE, "batch", *args, "-j", str(jobs)], cwd=ROOT, env=env, preexec_fn=pin,  # noqa: PLW1509
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    return proc, time.perf_counter()


def run(args: list[str], core: int | None, log: Path, jobs: int = 1) -> float:
    proc, t0 = start(args, core, log, jobs)
    if proc.wait():
        raise SystemExit(f"grade batch failed; see {log}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=3, help="solved students per calibration run and per shard")
    ap.add_argument("--factor", type=float, default=3.5, help="a runner's cost over this machine's")
    ap.add_argument("--setup-minutes", type=float, default=4.0, help="a runner's setup before grading (assumed)")
    ap.add_argument("--clone-minutes", type=float, default=5.0, help="the clone job's time (assumed)")
    ap.add_argument("--rate-only", action="store_true", help="only the unsharded quick batch's rate")
    ap.add_argument("--plan-only", type=Path, default=None, metavar="JSON",
                    help="print the plan from the figures an earlier run wrote (--json) and the similarity report's time")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    opts = ap.parse_args()
    cal = calibration()
    print(f"calibration: {cal['cpu']}, {cal['isa']}, {cal['cores']} cores; sigmoid {cal['sigmoid_us']:.1f} us, "
          f"tanh {cal['tanh_us']:.1f} us, mm {cal['mm_us']:.1f} us, {cal['gflops']:.1f} GFLOP/s\n")
    figures: dict = {"calibration": cal}
    if opts.plan_only:
        figures = {**json.loads(opts.plan_only.read_text()), "similarity": similarity_seconds(1000)}
        print(f"similarity report of 1,000 made-up students: {figures['similarity']:.1f} s")
        plan(figures, opts)
        return
    if opts.rate_only:
        figures["rate"] = batch_rate()
        print(f"`grade batch --quick`, 12 submissions, -j {os.cpu_count()}: {figures['rate']:.1f} a minute")
        return
    free = cores()
    if len(free) < 2:
        raise SystemExit("the side-by-side check needs two cores")
    with tempfile.TemporaryDirectory(prefix="attnlab-regrade-bench-") as tmp:
        tmp = Path(tmp)
        # a and b from two whole-machine batches (-j 2, every core busy, as on a runner): b is what a student
        # costs the machine when every core grades, a what is left over; two cores of one machine share
        # caches and often one physical core, so a core alone is faster than a core beside a busy one
        walls = {}
        for n in (2, 2 * opts.students):
            klass = make_class(tmp / f"cal{n}", n)
            walls[n] = run([str(klass), "--out", str(tmp / f"cal{n}" / "out" / "grades.csv")], None,
                           tmp / f"cal{n}.log", jobs=len(free))
        big = 2 * opts.students
        b = (walls[big] - walls[2]) / (big - 2)  # machine-seconds a student, all cores grading
        a = walls[2] - 2 * b
        figures.update(a=a, b=b, walls=walls)
        print(table([["measure", "seconds"],
                     *[[f"`grade batch -j {len(free)}` of {n} solved students", f"{w:.1f}"] for n, w in walls.items()],
                     ["b: a student's cost to the whole machine (the slope)", f"{b:.1f}"],
                     ["a: a batch's own start and end (the intercept)", f"{a:.1f}"]]))
        share = len(free)  # a shard pinned to one of the machine's cores, beside the others: b x cores a student
        # the check: a class of 2 x students in two shards, side by side, a core each
        klass = make_class(tmp / "class", 2 * opts.students)
        from grader.regrade.shard import Shard, members

        names = sorted(p.name for p in klass.iterdir())
        procs = []
        for k, core in zip((1, 2), free[:2]):
            part = tmp / "parts" / str(k)
            procs.append((k, len(members(names, Shard(k, 2))),
                          *start([str(klass), "--shard", f"{k}/2", "--out", str(part / "grades.csv")], core,
                                 tmp / f"shard{k}.log")))
        rows = [["shard", "students", f"predicted a + {share} b n", "measured", "off by"]]
        figures["shards"] = []
        for k, n, proc, t0 in procs:
            if proc.wait():
                raise SystemExit(f"shard {k} failed; see {tmp / f'shard{k}.log'}")
            took, predicted = time.perf_counter() - t0, a + share * b * n
            rows.append([f"{k}/2", str(n), f"{predicted:.1f} s", f"{took:.1f} s", f"{(took / predicted - 1) * 100:+.1f} %"])
            figures["shards"].append({"shard": k, "students": n, "predicted": predicted, "measured": took})
        t0 = time.perf_counter()
        done = subprocess.run([*GRADE, "batch", "merge", str(tmp / "parts"), "--out", str(tmp / "merged" / "grades.csv")],
                              cwd=ROOT, capture_output=True, text=True, check=False)
        merge = time.perf_counter() - t0
        if done.returncode:
            raise SystemExit(f"merge failed: {done.stdout}{done.stderr}")
        print("\nTwo shards side by side, a core each:\n")
        print(table(rows))
        print(f"\nmerge of the two parts (with the class and similarity reports): {merge:.1f} s")
        figures["merge"] = merge
    figures["similarity"] = similarity_seconds(1000)
    print(f"\nsimilarity report of 1,000 made-up students: {figures['similarity']:.1f} s")
    plan(figures, opts)
    if opts.json:
        opts.json.write_text(json.dumps(figures, indent=2))


def made_up_class(code: Path, students: int) -> Path:
    """A class of `students` in `code`: each piece one of the tests' three solutions with names changed, lines
    dropped and added at random, a tenth untouched stubs (tests/regrade/test_similarity), the same every time."""
    import random
    import re

    from grader.core.pieces import MODULES
    from tests.regrade.test_similarity import CAROL, DAVE, as_alice, stub

    rng = random.Random(0)
    pools = {m: [as_alice(m), CAROL[m]] + ([DAVE[m]] if m in DAVE else []) for m in MODULES}

    def mutate(text: str, stub_text: str) -> str:
        keep = set(stub_text.splitlines())
        out = []
        for line in text.splitlines():
            if line in keep or not line.strip():
                out.append(line)
                continue
            r = rng.random()
            if r < 0.15:
                continue
            if r < 0.35:
                out.append(f"{line[: len(line) - len(line.lstrip())]}v{rng.randint(0, 99)} = x.sum({rng.randint(-2, 2)})")
            out.append(re.sub(r"\b(keys|query|scores|alpha|logits|state|h|c)\b",
                              lambda m: m.group(0) + rng.choice(["", "_", "2"]), line))
        return "\n".join(out) + "\n"

    for i in range(students):
        folder = code / f"s{i:04d}"
        folder.mkdir(parents=True)
        for m in MODULES:
            r = rng.random()
            if r < 0.05:
                continue
            text = stub(m) if r < 0.15 else mutate(rng.choice(pools[m]), stub(m))
            (folder / f"{m}.py").write_text(text)
    return code


def similarity_seconds(students: int) -> float:
    """The similarity report's time over made_up_class(students), the reference a known source as in the regrade."""
    from grader.regrade import similarity, similarity_input

    with tempfile.TemporaryDirectory(prefix="attnlab-similarity-bench-") as tmp:
        code = made_up_class(Path(tmp) / "code", students)
        t0 = time.perf_counter()
        similarity.report(code, Path(tmp) / "report.html", known=similarity_input.reference())
        return time.perf_counter() - t0


def plan(figures: dict, opts) -> None:
    """Shards for a class of 1,000 (and others) on 2-core runners grading two students at once."""
    f = opts.factor
    b_runner = figures["b"] * f  # b is already a student's cost to a whole 2-core machine grading -j 2
    a_runner = figures["a"] * f
    merge = opts.setup_minutes * 60 + figures.get("similarity", 0.0) * f
    fixed = opts.clone_minutes * 60 + opts.setup_minutes * 60 + a_runner + merge
    rows = [["class", "finish within", "students a shard", "shards", "clone + setup + grading + merge"]]
    for students, minutes in ((300, 30), (1000, 30), (1000, 60), (2000, 60)):
        scale = (students / 1000) ** 2  # the similarity report compares every pair
        fixed_n = fixed - figures.get("similarity", 0.0) * f * (1 - scale)
        per_shard = max(1, math.floor((minutes * 60 - fixed_n) / b_runner))
        shards = math.ceil(students / per_shard)
        n = math.ceil(students / shards)
        grading = a_runner + b_runner * n
        wall = opts.clone_minutes * 60 + opts.setup_minutes * 60 + grading + merge - figures.get("similarity", 0.0) * f * (1 - scale)
        rows.append([str(students), f"{minutes} min", str(per_shard), str(shards),
                     f"{opts.clone_minutes:g} + {opts.setup_minutes:g} + {grading / 60:.1f} + "
                     f"{(wall - grading) / 60 - opts.clone_minutes - opts.setup_minutes:.1f} = {wall / 60:.1f} min"])
    print(f"\nThe plan on 2-core runners at {f}x this machine's cost, -j 2: b {b_runner:.0f} s a student, a "
          f"{a_runner:.0f} s a shard; the clone job {opts.clone_minutes:g} min and each job's setup (torch, the "
          f"project, the class artifact) {opts.setup_minutes:g} min, both assumed; the merge: its setup and the "
          f"similarity report ({figures.get('similarity', 0.0):.0f} s here for 1,000 students, x{f})\n")
    print(table(rows))


if __name__ == "__main__":
    main()
