"""`grade [PIECE...]`: grade a submission folder piece by piece, each in its own process."""
from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import layout, manifest, report
from .pieces import MODULES, PIECES
from .host import FORK_SERVERS, StartError
from .sandbox import Limits, PieceRun, Zygote, run_piece, selected

DEFAULT_SEED = "0"
PUBLIC_NOTE = ("Public smoke checks only: the graded cases are sealed in this release and run in GitHub Classroom "
               "(where ATTNLAB_SEAL_KEY is set). Passing these is not the grade.")


def resolve_seed(seed: str | None) -> str:
    """The hidden seed: given, else ATTNLAB_SEED, else the default."""
    return seed or os.environ.get("ATTNLAB_SEED") or DEFAULT_SEED


def grade(
    *, submission: Path, pieces: list[str], seed: str, limits: Limits, reference: Path | None = None,
    progress=None, zygote: Zygote | None = None, training=None,
) -> list[PieceRun]:
    """Grade `pieces` of `submission`; the score is computed here, from the manifest and signed records.

    With a zygote given (a batch job) the pieces run one after another on it; otherwise the quick pieces
    first, one at a time, then the training pieces side by side on up to two zygotes of their own, so a
    grade takes about as long as its longest piece plus the quick ones.
    progress(piece) hears of each piece as it starts and progress(piece, finished=True) as it ends;
    training(piece, event) hears of a training case's chunks.
    """
    where = layout.current()
    expected = manifest.read(where.manifest)
    ref = reference or where.reference
    refused = json.loads((submission / REFUSED).read_text()) if (submission / REFUSED).is_file() else {}
    shown = threading.Lock()

    def one(piece: str, zyg: Zygote) -> PieceRun:
        if progress:
            with shown:
                progress(piece)
        why = refused.get(f"{PIECES[piece].module}.py")
        if why:
            run = refused_run(piece, expected[piece], why, limits)
        else:
            run = run_piece(piece, expected[piece], submission, ref, seed, limits, zyg, where.cases,
                            on_progress=(lambda event: training(piece, event)) if training else None)
        if progress:
            with shown:
                progress(piece, finished=True)
        return run

    if zygote is not None:
        return [one(piece, zygote) for piece in pieces]
    trains = [p for p in pieces if any(c.get("slow") for c in selected(expected[p], limits))]
    rest = [p for p in pieces if p not in trains]
    done: dict[str, PieceRun] = {}
    cores = os.cpu_count() or 1
    if not FORK_SERVERS:
        # Without fork every judge and worker is a fresh interpreter whose start dominates, and there is no jail
        # to keep pieces apart: two lanes for everything.
        _lanes(trains + rest, [None] * min(2, cores, len(pieces)), one, done)
        return [done[p] for p in pieces]
    # The training pieces' workers hold other pieces' code (the decoder's the reference encoder and attentions,
    # Luong's the lab's encoder), and machine-wide state (the page cache) can carry it to a worker running at
    # the same time: so the quick pieces run first, one at a time, and the training pieces after them, side by
    # side, one lane per core, up to two (each worker trains on one thread, so the numbers match a batch's
    # one-at-a-time run). The training lanes' fork servers warm up meanwhile.
    zygotes = [Zygote() for _ in range(max(1, min(2, cores, len(trains))))]
    try:
        _lanes(rest, zygotes[:1], one, done)
        _lanes(trains, zygotes, one, done)
    finally:
        for zyg in zygotes:
            zyg.close()
    return [done[p] for p in pieces]


def _lanes(order: list[str], zygotes: list, one, done: dict) -> None:
    """Grade `order` on one lane per zygote (None: a fresh interpreter per piece), each taking the next piece."""
    todo = iter(order)
    take = threading.Lock()
    errors: list[BaseException] = []

    def lane(zyg) -> None:
        try:
            while not errors:
                with take:
                    piece = next(todo, None)
                if piece is None:
                    return
                done[piece] = one(piece, zyg)
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread below
            errors.append(e)

    if len(zygotes) <= 1:
        lane(zygotes[0] if zygotes else None)
    else:
        threads = [threading.Thread(target=lane, args=(z,), daemon=True) for z in zygotes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


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
    from .sandbox import CaseResult

    cases = [CaseResult(c["case"], c["points"], False, why) for c in selected(expected, limits)]
    return PieceRun(piece, cases)


class TrainingDisplay:
    """Turns a training case's progress into one line, e.g. "decoder: training step 300/700, validation
    accuracy at 30 words 0.66, at most 14 s left", written at most every `every` seconds per piece; or,
    `short`, into a progress bar's text holding every training piece's latest step."""

    def __init__(self, write, every: float = 5.0, short: bool = False) -> None:
        self.write, self.every, self.short, self.last = write, every, short, {}
        self.latest: dict[str, str] = {}
        self.lock = threading.Lock()

    def __call__(self, piece: str, event: dict) -> None:
        step, top, seconds = int(event["step"]), int(event["max_steps"]), event["seconds"]
        left = (top - step) * seconds / max(step, 1)  # at the rate so far; the stop rule may end it sooner
        with self.lock:
            if self.short:  # a progress bar's text: every training piece at once, the latest of each
                self.latest[piece] = f"{piece} step {step}/{top}, acc@30 {event['acc']:.2f}, <= {left:.0f} s"
                self.write(" | ".join(self.latest.values()))
                return
            now = time.monotonic()
            if now - self.last.get(piece, -1e9) >= self.every:
                self.last[piece] = now
                self.write(f"{piece}: training step {step}/{top}, validation accuracy at 30 words {event['acc']:.2f}, "
                           f"at most {left:.0f} s left")


def grader_failed(message: str, fmt: str, out: Path | None, echo) -> int:
    """The grader's own processes failed: one line naming the cause, in the format asked for; exit code 2."""
    text = report.grader_error(fmt, message)
    line = report.grader_error("text", message)
    if out and text is not None:
        out.write_text(text + "\n")
    print(f"Error: {line}", file=sys.stderr)
    if text is not None and text != line and not out:
        echo(text)
    return 2


def left_out(pieces: list[str], limits: Limits) -> tuple[int, int] | None:
    """(cases, points) a quick run leaves out of these pieces; None for a full run."""
    if not limits.quick:
        return None
    expected = manifest.read(layout.current().manifest)
    slow = [c for p in pieces for c in expected[p] if c.get("slow")]
    return (len(slow), sum(c["points"] for c in slow)) if slow else None


def main(
    *, submission: Path, pieces: list[str], fmt: str, seed: str | None, limits: Limits, out: Path | None = None,
    echo=print, plots: Path | None = None, label: str | None = None,
) -> int:
    """Grade and print (or write) the report; returns the exit code: 0 all passed, 1 some failed."""
    seed = resolve_seed(seed)
    selected = pieces or list(PIECES)
    start = time.perf_counter()
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
                         progress=progress, training=show)
        except StartError as e:
            return grader_failed(str(e), fmt, out, echo)
        finally:
            bar.close()
    seconds = round(time.perf_counter() - start, 2)
    quick = left_out(selected, limits)
    table = report.to_text(runs, label or str(submission), quick=quick) + f"  ({seconds:.1f} s)"
    if layout.current().public:
        table = PUBLIC_NOTE + "\n\n" + table
    if fmt == "text":
        text = table
    elif fmt == "json":
        text = report.to_json(runs, seconds=seconds, quick=quick)
    elif fmt == "classroom":
        text = report.to_classroom(runs)  # never quick: the CLI refuses --quick with this format
    else:
        text = report.FORMATS[fmt](runs, quick=quick)
    if out:
        out.write_text(text + "\n")
        # machine formats go to the file; people watching the log (Classroom, CI) still get the table
        echo(table if fmt != "text" else f"report written to {out}")
    else:
        echo(text)
    if plots:
        from . import plots as drawing

        echo("training your Bahdanau and Luong models for the plots (about two minutes)...")
        try:
            paths = drawing.main(submission=submission, out=plots, memory_gb=limits.memory_gb)
            echo("plots written: " + ", ".join(str(p) for p in paths))
        except drawing.PlotError as e:
            echo(f"no plots: {e}")
    return 1 if any(report.failures(r) for r in runs) else 0
