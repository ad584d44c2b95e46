"""`grade [PIECE...]`: grade a submission folder piece by piece, each in its own process."""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from grader.core import datasets, pagecache
from grader.core.host import StartError
from grader.core.pieces import PIECES
from grader.runner import layout, report
from grader.runner.formats import FORMATS, grader_error, render
from grader.runner.display import PUBLIC_NOTE, TrainingDisplay, left_out, resolve_seed
from grader.runner.results import Limits
from grader.runner.schedule import grade, start_server
from grader.runner.stage import stage


def grader_failed(message: str, fmt: str, out: Path | None, echo) -> int:
    """The grader's own processes failed: one line naming the cause, in the format asked for; exit code 2."""
    text = grader_error(fmt, message)
    line = grader_error("text", message)
    if out and text is not None:
        out.write_text(text + "\n")
    print(f"Error: {line}", file=sys.stderr)
    if text is not None and text != line and not out:
        echo(text)
    return 2


def page_cache_kept() -> str | None:
    """Where the graded cases run on a self-hosted runner, which keeps its machine from one push to the next: the
    page cache dropped first (an earlier push's workers could have left bits in it for this one's), or why no score
    may be posted. A runner declared a new machine for every job (ATTNLAB_FRESH_RUNNER=1) has nothing to drop."""
    if not layout.current().sealed or os.environ.get("RUNNER_ENVIRONMENT") != "self-hosted" or pagecache.fresh_machine():
        return None
    why = pagecache.drop()
    if why is None:
        return None
    return (f"this self-hosted runner could not drop its page cache ({why}), through which an earlier push's workers "
            "could pass bits to this one's: install the helper as the autograder's SETUP.md says, or set "
            f"{pagecache.FRESH_ENV}=1 in the runner's environment if every job gets a new machine. No score is posted.")


def main(
    *, submission: Path, pieces: list[str], fmt: str, seed: str | None, limits: Limits, out: Path | None = None,
    echo=print, plots: Path | None = None, label: str | None = None,
) -> int:
    """Grade and print (or write) the report; returns the exit code: 0 all passed, 1 some failed."""
    seed = resolve_seed(seed)
    selected = pieces or list(PIECES)
    kept = page_cache_kept()
    if kept:
        return grader_failed(kept, fmt, out, echo)
    start = time.perf_counter()
    first = start_server()  # it warms while the data is checked and the submission staged
    try:
        datasets.verify()  # the folder is the student's in a Classroom repository
    except datasets.DataChanged as e:
        if first is not None:
            first.kill()
        return grader_failed(str(e), fmt, out, echo)
    from tqdm import tqdm

    # a bar on a terminal; logs (CI, Classroom) get a plain line every few seconds while a model trains
    tty = sys.stderr.isatty()
    bar = tqdm(total=len(selected), unit="piece", file=sys.stderr, disable=not tty, leave=False,
               bar_format="{n}/{total} pieces done [{elapsed}]{postfix}")  # no bar graphic: room for the text
    show = TrainingDisplay(lambda text: bar.set_postfix_str(text) if tty else print(text, file=sys.stderr, flush=True),
                           every=5.0, short=tty)

    def progress(piece: str, finished: bool = False) -> None:
        if finished:
            bar.update(1)
        elif not show.latest:  # a training piece's own text, once there is one, says more
            bar.set_postfix_str(piece)

    with tempfile.TemporaryDirectory(prefix="attnlab-sub-") as tmp:
        try:
            runs = grade(submission=stage(submission, Path(tmp)), pieces=selected, seed=seed, limits=limits,
                         progress=progress, training=show, first=first)
        except StartError as e:
            return grader_failed(str(e), fmt, out, echo)
        finally:
            bar.close()
            if first is not None and first.alive():  # grade was not reached (staging failed): it closes the server
                first.kill()
    seconds = round(time.perf_counter() - start, 2)
    shown = dict(quick=left_out(selected, limits), seconds=seconds, source=label or str(submission))
    table = render("text", runs, **shown)
    if layout.current().public:
        table = PUBLIC_NOTE + "\n\n" + table
    # a format for people is the table; one for machines is its own (the CLI refused --quick where it may not go)
    machine = FORMATS[fmt].machine
    text = render(fmt, runs, **shown) if machine else table
    if out:
        out.write_text(text + "\n")
        # machine formats go to the file; people watching the log (Classroom, CI) still get the table
        echo(table if machine else f"report written to {out}")
    else:
        echo(text)
    if plots:
        from grader.plots import draw as drawing

        from grader.core import measured

        took = measured.seconds("grade_plots")
        echo("training your Bahdanau and Luong models for the plots, side by side"
             + (f" (a whole `grade --plots` took {took} {measured.where('grade_plots')}; a slower or busier CPU "
                "takes longer, several times that on a loaded one)" if took else "") + "...")
        try:
            paths = drawing.main(submission=submission, out=plots, memory_gb=limits.memory_gb)
            echo("plots written: " + ", ".join(str(p) for p in paths))
        except drawing.PlotError as e:
            echo(f"no plots: {report.safe(str(e), 500)}")  # it may quote the student's exception
    return 1 if any(report.failures(r) for r in runs) else 0
