"""Measure what the lab tells people about its times and counts, and write the one record of them.

    python bench/record.py                          # full and quick grades of reference/ (median of 3 each)
    python bench/record.py --plots                  # and one `grade --plots` (about 1.5 minutes more)
    python bench/record.py --ci-log LOG             # and the suites' counts and times from a `.ci/run` log
    python bench/record.py --notebook               # and the lesson notebook's two training cells (about 2 minutes more)
    python bench/record.py --no-grades              # no grade timed: the suites' test counts (and what else is asked)

Writes grader/core/measured.json (the command line reads it: `--quick`'s help, `grade --plots`'s announcement; the
lesson notebook's prose too, so exercises/lesson.ipynb is written again) and docs/measured.md (what the README links
to). Each figure carries the machine (bench.py's calibration), the date
and the commit it was measured at; a figure this run does not measure keeps its earlier entry, stamped as it was.
Every run counts the suites' tests as pytest collects them in a clean checkout of HEAD (not the uncommitted files
beside it), so no count on the page is typed, and each is stamped with the commit it counts.
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
    "fast_tests_collected": "the fast tests there are (`pytest --collect-only -m \"not slow\"`)",
    "slow_tests_collected": "the slow tests there are (`pytest --collect-only -m slow`)",
}
# the marker expression each count is collected with
COLLECTED = {"fast_tests_collected": "not slow", "slow_tests_collected": "slow"}
# the lesson notebook's training cells (grader/templates/lesson/), whose prose quotes these times
NOTEBOOK_CELLS = {"notebook_bahdanau": "train.ipy", "notebook_luong": "luong-train.ipy"}
WHAT |= {"notebook_bahdanau": "the lesson notebook's Bahdanau training cell (reference pieces, no step cap)",
         "notebook_luong": "the lesson notebook's Luong training cell (reference pieces, no step cap)"}


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


def collected(marker: str, folder: Path) -> int:
    """How many tests `pytest --collect-only -m MARKER` finds in `folder` (its pytest settings), none run."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", marker], cwd=folder, capture_output=True, text=True, timeout=600)
    found = re.search(r"^(\d+)(?:/\d+)? tests? collected", done.stdout, re.MULTILINE)
    if done.returncode != 0 or found is None:  # a collection error would make the count a guess
        raise SystemExit(f"pytest --collect-only -m {marker!r} failed: {(done.stdout + done.stderr)[-2000:]}")
    return int(found.group(1))


def notebook_cells() -> dict[str, tuple[float, int]]:
    """{"notebook_bahdanau": (seconds, steps), ...}: the reference notebook run top to bottom in a kernel with no step
    cap, each training cell's wall time (what a student waits) and the steps it printed."""
    import os

    import nbclient

    from grader.lesson import notebook
    from grader.lesson.cells import cell_id

    nb = notebook.build("reference")
    saved = {k: os.environ.get(k) for k in ("ATTNLAB_NOTEBOOK_STEPS", "MPLBACKEND")}
    os.environ.pop("ATTNLAB_NOTEBOOK_STEPS", None)  # the kernel inherits this environment: no cap, no window
    os.environ["MPLBACKEND"] = "Agg"
    try:
        with tempfile.TemporaryDirectory(prefix="attnlab-record-") as tmp:
            nbclient.NotebookClient(nb, timeout=3600, kernel_name="python3", record_timing=True,
                                    resources={"metadata": {"path": tmp}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = {}
    for name, entry in NOTEBOOK_CELLS.items():
        cell = next(c for c in nb.cells if c.id == cell_id(entry))
        when = {k: datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
                for k, v in cell.metadata["execution"].items()}
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        steps = re.search(r"^(\d+) steps in ", text, re.MULTILINE)
        if steps is None:  # the cell did not train (a piece failed, or the model is sealed): no time to record
            raise SystemExit(f"the notebook's {entry} cell printed no step count: {text[-1000:]}")
        out[name] = ((when["shell.execute_reply"] - when["iopub.execute_input"]).total_seconds(), int(steps.group(1)))
    return out


def page(rec: dict) -> str:
    lines = ["# Measured times and counts", "",
             "Written by `python bench/record.py` from grader/core/measured.json, which the command line reads too: every",
             "time or count the README, `grade --help` and `grade --plots` give comes from here. Each figure with the",
             "machine, date and commit it was measured at (docs/performance.md has how each changed, and why).", "",
             "| figure | value | machine (calibration, one thread) | date | commit |", "|---|---|---|---|---|"]
    for name, e in rec.items():
        value = (f"{e['value']:g} {e['unit']}" + (f" ({e['count']} tests)" if "count" in e else "")
                 + (f" ({e['steps']} steps)" if "steps" in e else ""))
        machine = e["machine"] + (f", torch {e['torch']}" if "torch" in e else "")
        lines.append(f"| {e['what']} | {value} | {machine} ({e['calibration']}) | {e['date']} | {e['commit']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plots", action="store_true", help="also time one `grade --plots`")
    ap.add_argument("--ci-log", type=Path, default=None, help="a `.ci/run` log: the suites' counts and times")
    ap.add_argument("--ci-commit", default=None, help="the commit that log's run tested (default: HEAD)")
    ap.add_argument("--no-grades", action="store_true",
                    help="time no full or quick grade: the test counts and what the other options ask, alone")
    ap.add_argument("--notebook", action="store_true", help="also time the lesson notebook's two training cells")
    args = ap.parse_args()
    rec = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    short, figures = machine()
    import torch

    stamp = {"machine": short, "calibration": figures, "torch": torch.__version__,
             "date": datetime.date.today().isoformat(),
             "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                      text=True).stdout.strip()}

    def put(name: str, value: float, unit: str = "s", **more) -> None:
        rec[name] = {"value": round(value, 1), "unit": unit, "what": WHAT[name], **stamp, **more}
        print(f"{name}: {rec[name]['value']:g} {unit}", flush=True)

    with tempfile.TemporaryDirectory(prefix="attnlab-record-") as tmp:
        from interleave import worktree  # bench/interleave.py

        tree = worktree("HEAD", Path(tmp) / "head")
        try:
            for name, marker in COLLECTED.items():
                put(name, collected(marker, tree), "tests")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    if not args.no_grades:
        full = statistics.median(timed(["--submission", "reference", "--format", "json"]) for _ in range(args.rounds))
        quick = statistics.median(timed(["--submission", "reference", "--quick", "--format", "json"])
                                  for _ in range(args.rounds))
        put("grade_full", full)
        put("grade_quick", quick)
        put("grade_training", full - quick)
    if args.plots:
        with tempfile.TemporaryDirectory() as tmp:
            put("grade_plots", timed(["--submission", "reference", "--plots", tmp]))
    if args.notebook:
        for name, (seconds, steps) in notebook_cells().items():
            put(name, seconds, steps=steps)
    if args.ci_log:  # last: its figures are stamped with the log's commit
        if args.ci_commit:
            stamp["commit"] = args.ci_commit
        for name, (count, seconds) in suites(args.ci_log.read_text(errors="replace")).items():
            put(name, seconds / 60, "minutes", count=count)
    write(rec)


def write(rec: dict) -> None:
    """The record, its page, and the notebook whose prose quotes it (as `grade stubs` writes it)."""
    from grader.core import measured
    from grader.lesson import notebook

    RECORD.write_text(json.dumps(rec, indent=1) + "\n")
    PAGE.write_text(page(rec))
    measured.record.cache_clear()  # anything imported may have read the old record: the notebook quotes the new one
    print(f"written: {notebook.write().relative_to(ROOT)}")


if __name__ == "__main__":
    main()
