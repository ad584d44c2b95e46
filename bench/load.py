"""The context's no-loop verdict on a busy machine: every honest spelling and every loop the tests know, each graded
ROUNDS times (a hidden seed of its own each time) beside two other full grades of the reference and two busy loops.

    python bench/load.py                 # 20 rounds (about an hour on 2 cores)
    python bench/load.py --rounds 3      # a quick look
    python bench/load.py --grades 0 --hogs 0    # the same on a quiet machine
    python bench/load.py --only print --rounds 40  # the sources whose name holds "print"

Prints the calibration line first (bench.py's), the machine's load average at the start and the end, then one row per
source: how often it kept the no-loop points, and how often any of its cases was timed out, and then the message of
every grade that went against its kind. Honest code should keep them every time and meet no timeout; every loop
should lose them every time. Nothing here is asserted: the slow test
tests/redteam/test_short_side.py keeps a few of these.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from grader.runner.results import Limits  # noqa: E402 - after the paths above

from helpers import grade_dict, make_submission  # noqa: E402
from redteam import short_side, test_loops  # noqa: E402


def sources() -> tuple[dict[str, str], dict[str, str]]:
    """({honest spelling: context.py}, {loop: context.py}), from the tests' own tables."""
    honest = {f"honest: {how}": (test_loops.LISTING.read_text() if body is None else short_side.source(body))
              for how, body in test_loops.HONEST.items()}
    honest["honest: the reference"] = short_side.source(None)
    honest["honest: bmm with a print of its tensor at every call"] = short_side.source(short_side.PRINTING)
    loops = {"loop: a for loop over the positions": short_side.source(test_loops.FOR_LOOP)}
    for table in (test_loops.LOOPS, test_loops.PAID_BEFORE):
        loops.update({f"loop: {how}": short_side.source(body, end) for how, (body, end, _) in table.items()})
    loops.update({f"loop: {how}": short_side.source(body) for how, body in test_loops.ISSUE_39.items()})
    loops.update({f"loop: {how}": short_side.source(*pair) for how, pair in short_side.LOOPS.items()})
    return honest, loops


def outcome(report: dict) -> tuple[bool, bool, str]:
    """(whether the no-loop case passed, whether any case of the piece was timed out, the no-loop case's message)."""
    cases = next(p["cases"] for p in report["pieces"] if p["name"] == "context")
    case = next(c for c in cases if c["name"] == test_loops.NO_LOOP)
    return case["passed"], any("timed out" in (c.get("message") or "") for c in cases), case.get("message") or ""


def main(*, rounds: int, grades: int, hogs: int, only: str = "") -> None:
    from interleave import calibration_line

    print(calibration_line(), flush=True)
    honest, loops = ({k: v for k, v in table.items() if only in k} for table in sources())
    every = {**honest, **loops}
    counts = {name: [0, 0] for name in every}  # kept the points, met a timeout
    against: list[str] = []  # honest code that lost the points, a loop that kept them: what the grade said
    limits = Limits(quick=True)  # `grade --quick`'s own limits
    with tempfile.TemporaryDirectory(prefix="attnlab-load-") as tmp:
        subs = {name: make_submission(Path(tmp) / f"s{i}", files={"context": text})
                for i, (name, text) in enumerate(every.items())}
        with short_side.busy_machine(grades=grades, hogs=hogs):
            start = time.monotonic()
            print(f"beside {grades} full grade(s) of the reference and {hogs} busy loop(s); load average "
                  f"{os.getloadavg()[0]:.1f} at the start", flush=True)
            for r in range(rounds):
                for name, sub in subs.items():
                    passed, timed_out, message = outcome(grade_dict(sub, ["context"], limits=limits,
                                                                    seed=f"load-{r}-{name}"))
                    if passed != (name in honest):
                        against.append(f"round {r + 1}, {name}: {message or 'passed'}")
                    counts[name][0] += passed
                    counts[name][1] += timed_out
                print(f"round {r + 1}/{rounds} done, {time.monotonic() - start:.0f} s, load average "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
    width = max(map(len, every))
    print(f"\n{'source':<{width}}  kept  timed out  (of {rounds})")
    for name, (kept, timed_out) in counts.items():
        print(f"{name:<{width}}  {kept:>4}  {timed_out:>9}")
    honest_kept = sum(counts[n][0] for n in honest)
    loops_kept = sum(counts[n][0] for n in loops)
    print("\n" + "\n".join(against) if against else "\nno grade went against its kind")
    print(f"\nhonest: kept {honest_kept} of {rounds * len(honest)}; loops: kept {loops_kept} of {rounds * len(loops)}; "
          f"timed out: {sum(c[1] for c in counts.values())}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--grades", type=int, default=2, help="full grades of the reference running beside, each in a loop")
    ap.add_argument("--hogs", type=int, default=2, help="busy loops beside")
    ap.add_argument("--only", default="", help="only the sources whose name holds this")
    args = ap.parse_args()
    main(rounds=args.rounds, grades=args.grades, hogs=args.hogs, only=args.only)
