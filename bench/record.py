"""Measure what the lab tells people about its times and counts, and write the one record of them.

    python bench/record.py                          # full and quick grades of reference/ (median of 3 each)
    python bench/record.py --plots                  # and one `grade --plots` (about 1.5 minutes more)
    python bench/record.py --ci-log LOG             # and the suites' counts and times from a `.ci/run` log

Writes grader/core/measured.json (the command line reads it: `--quick`'s help, `grade --plots`'s announcement) and
docs/measured.md (what the README links to). Each figure carries the machine (bench.py's calibration), the date
and the commit it was measured at; a figure this run does not measure keeps its earlier entry, stamped as it was.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from grader.core.measured import RECORD  # noqa: E402

PAGE = ROOT / "docs" / "measured.md"
# name: what it is, in the words every place that shows it uses
WHAT = {
    "grade_full": "a full `grade` of reference/, both training cases (median)",
    "grade_quick": "`grade --quick` of reference/ (median)",
    "grade_training": "what the two training cases add to a grade (full less quick)",
    "grade_plots": "`grade --plots` of reference/: the grade and both models trained from scratch",
    "fast_tests": "the fast tests (`pytest -m \"not slow\"`, the README's test command)",
    "slow_tests": "the slow tests (`pytest -m slow`)",
}


def machine() -> tuple[str, str]:
    """("a 2-core AMD EPYC (AVX-512)", bench.py's calibration figures)."""
    from bench import calibration

    c = calibration()
    cpu = " ".join(w for w in c["cpu"].split() if not re.fullmatch(r"\d+-Core|Processor|\d+", w))
    return (f"a {c['cores']}-core {cpu} ({c['isa']})",
            f"sigmoid {c['sigmoid_us']:.0f} us, tanh {c['tanh_us']:.0f} us, 256^3 matmul {c['mm256_us'] / 1000:.2f} ms")


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "grader", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode not in (0, 1):
        raise SystemExit(f"grade {' '.join(argv)} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def suites(log: str) -> dict[str, tuple[int, float]]:
    """{"fast_tests": (passed, seconds), "slow_tests": ...} from a `.ci/run` log's two pytest summary lines."""
    found = re.findall(r"=+ (\d+) passed.*? in ([\d.]+)s", log)
    return dict(zip(("fast_tests", "slow_tests"), ((int(n), float(s)) for n, s in found)))


def page(rec: dict) -> str:
    lines = ["# Measured times and counts", "",
             "Written by `python bench/record.py` from grader/core/measured.json, which the command line reads too: every",
             "time or count the README, `grade --help` and `grade --plots` give comes from here. Each figure with the",
             "machine, date and commit it was measured at (docs/performance.md has how each changed, and why).", "",
             "| figure | value | machine (calibration, one thread) | date | commit |", "|---|---|---|---|---|"]
    for name, e in rec.items():
        value = f"{e['value']:g} {e['unit']}" + (f" ({e['count']} tests)" if "count" in e else "")
        lines.append(f"| {e['what']} | {value} | {e['machine']} ({e['calibration']}) | {e['date']} | {e['commit']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plots", action="store_true", help="also time one `grade --plots`")
    ap.add_argument("--ci-log", type=Path, default=None, help="a `.ci/run` log: the suites' counts and times")
    ap.add_argument("--ci-commit", default=None, help="the commit that log's run tested (default: HEAD)")
    args = ap.parse_args()
    rec = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    short, figures = machine()
    stamp = {"machine": short, "calibration": figures, "date": datetime.date.today().isoformat(),
             "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                      text=True).stdout.strip()}

    def put(name: str, value: float, unit: str = "s", **more) -> None:
        rec[name] = {"value": round(value, 1), "unit": unit, "what": WHAT[name], **stamp, **more}
        print(f"{name}: {rec[name]['value']:g} {unit}", flush=True)

    full = statistics.median(timed(["--submission", "reference", "--format", "json"]) for _ in range(args.rounds))
    quick = statistics.median(timed(["--submission", "reference", "--quick", "--format", "json"])
                              for _ in range(args.rounds))
    put("grade_full", full)
    put("grade_quick", quick)
    put("grade_training", full - quick)
    if args.plots:
        with tempfile.TemporaryDirectory() as tmp:
            put("grade_plots", timed(["--submission", "reference", "--plots", tmp]))
    if args.ci_log:
        if args.ci_commit:
            stamp["commit"] = args.ci_commit
        for name, (count, seconds) in suites(args.ci_log.read_text(errors="replace")).items():
            put(name, seconds / 60, "minutes", count=count)
    RECORD.write_text(json.dumps(rec, indent=1) + "\n")
    PAGE.write_text(page(rec))


if __name__ == "__main__":
    main()
