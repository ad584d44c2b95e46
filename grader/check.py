"""`grade [PIECE...]`: grade a submission folder piece by piece, each in its own process."""
from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

from . import layout, manifest, report
from .pieces import MODULES, PIECES
from .sandbox import Limits, PieceRun, Zygote, run_piece

DEFAULT_SEED = "0"
PUBLIC_NOTE = ("Public smoke checks only: the graded cases are sealed in this release and run in GitHub Classroom "
               "(where ATTNLAB_SEAL_KEY is set). Passing these is not the grade.")


def resolve_seed(seed: str | None) -> str:
    """The hidden seed: given, else ATTNLAB_SEED, else the default."""
    return seed or os.environ.get("ATTNLAB_SEED") or DEFAULT_SEED


def grade(
    *, submission: Path, pieces: list[str], seed: str, limits: Limits, reference: Path | None = None,
    progress=None, zygote: Zygote | None = None,
) -> list[PieceRun]:
    """Grade `pieces` of `submission`; the score is computed here, from the manifest and signed records."""
    where = layout.current()
    expected = manifest.read(where.manifest)
    ref = reference or where.reference
    runs = []
    own = zygote is None
    zygote = zygote or Zygote()
    try:
        refused = json.loads((submission / REFUSED).read_text()) if (submission / REFUSED).is_file() else {}
        for piece in pieces:
            if progress:
                progress(piece)
            why = refused.get(f"{PIECES[piece].module}.py")
            if why:
                runs.append(refused_run(piece, expected[piece], why, limits))
                continue
            runs.append(run_piece(piece, expected[piece], submission, ref, seed, limits, zygote, where.cases))
    finally:
        if own:
            zygote.close()
    return runs


MAX_FILE = 1 << 20  # bytes: a piece is a few kilobytes of Python
REFUSED = "REFUSED.json"  # in a staged folder: {piece file: why it was not copied}


def stage(submission: Path, into: Path) -> Path:
    """Copy the submission's lab files to a private folder: the original is never run in place or changed.

    Only regular files are copied, never followed through a link: a symlink, a FIFO or a device in place
    of a piece is refused, and the piece's cases say why.
    """
    dest = into / "submission"
    dest.mkdir(parents=True)
    refused = {}
    for m in MODULES:
        name = f"{m}.py"
        try:
            fd = os.open(submission / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError:
            refused[name] = f"{name} is a symbolic link; the grader reads only regular files: put the file itself there"
            continue
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a FIFO or a device
            os.close(fd)
            refused[name] = f"{name} is not a regular file; the grader reads only regular files: put the file itself there"
            continue
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            refused[name] = f"{name} is over {MAX_FILE // 1024} KB; a piece is a few kilobytes of Python"
            continue
        (dest / name).write_bytes(data)
    if refused:
        (dest / REFUSED).write_text(json.dumps(refused))
    return dest


def refused_run(piece: str, expected: list[dict], why: str, limits: Limits) -> PieceRun:
    from .sandbox import CaseResult, selected

    cases = [CaseResult(c["case"], c["points"], False, why) for c in selected(expected, limits)]
    return PieceRun(piece, cases)


def main(
    *, submission: Path, pieces: list[str], fmt: str, seed: str | None, limits: Limits, out: Path | None = None,
    echo=print, plots: Path | None = None,
) -> int:
    """Grade and print (or write) the report; returns the exit code: 0 all passed, 1 some failed."""
    seed = resolve_seed(seed)
    selected = pieces or list(PIECES)
    start = time.perf_counter()
    from tqdm import tqdm

    # a bar on a terminal only: logs (CI, Classroom) get the table alone
    bar = tqdm(total=len(selected), unit="piece", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)

    started = [False]

    def progress(piece: str) -> None:
        if started[0]:
            bar.update(1)
        started[0] = True
        training = piece == "decoder" and not limits.quick
        bar.set_postfix_str(f"{piece}{' (training your model, about a minute)' if training else ''}")

    with tempfile.TemporaryDirectory(prefix="attnlab-sub-") as tmp:
        try:
            runs = grade(submission=stage(submission, Path(tmp)), pieces=selected, seed=seed, limits=limits,
                         progress=progress)
        finally:
            bar.close()
    seconds = round(time.perf_counter() - start, 2)
    table = report.to_text(runs, str(submission)) + f"  ({seconds:.1f} s)"
    if layout.current().public:
        table = PUBLIC_NOTE + "\n\n" + table
    if fmt == "text":
        text = table
    elif fmt == "json":
        text = report.to_json(runs, seconds=seconds)
    else:
        text = report.FORMATS[fmt](runs)
    if out:
        out.write_text(text + "\n")
        # machine formats go to the file; people watching the log (Classroom, CI) still get the table
        echo(table if fmt != "text" else f"report written to {out}")
    else:
        echo(text)
    if plots:
        from . import plots as drawing

        echo("training your model for the plots (about a minute)...")
        try:
            paths = drawing.main(submission=submission, out=plots, memory_gb=limits.memory_gb)
            echo("plots written: " + ", ".join(str(p) for p in paths))
        except drawing.PlotError as e:
            echo(f"no plots: {e}")
    return 1 if any(report.failures(r) for r in runs) else 0
