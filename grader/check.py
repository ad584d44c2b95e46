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
from .pieces import MODULES, PIECES, run_order
from .host import FORK_SERVERS, StartError
from .sandbox import CaseResult, Limits, PieceRun, Zygote, run_piece, selected

DEFAULT_SEED = "0"
PUBLIC_NOTE = ("Public smoke checks only: the graded cases are sealed in this release and run in GitHub Classroom "
               "(where ATTNLAB_SEAL_KEY is set). Passing these is not the grade.")


def resolve_seed(seed: str | None) -> str:
    """The hidden seed: given, else ATTNLAB_SEED, else the default."""
    return seed or os.environ.get("ATTNLAB_SEED") or DEFAULT_SEED


class Grading:
    """One submission's grade as it is built: every piece's unit cases first, each piece alone and after the
    pieces whose reference its worker holds (`pieces.run_order`), then the training cases, which may run side
    by side (with each other, or a batch's other students') and only once the unit cases they `need` passed.

    Two workers that run at once, or one after another, can pass data through state the machine keeps (the
    page cache: see the README's threat model). So no unit run may meet a worker that holds its piece's
    answer, and a training case, the one thing that runs beside another piece, earns nothing its piece's
    own code did not already show alone.
    """

    def __init__(self, *, submission: Path, pieces: list[str], seed: str, limits: Limits,
                 reference: Path | None = None, progress=None, training=None) -> None:
        where = layout.current()
        self.submission, self.pieces, self.seed, self.limits = submission, pieces, seed, limits
        self.expected = manifest.read(where.manifest)
        self.ref, self.cases = reference or where.reference, where.cases
        self.refused = json.loads((submission / REFUSED).read_text()) if (submission / REFUSED).is_file() else {}
        self.progress, self.training, self.shown = progress, training, threading.Lock()
        self.order = run_order(pieces)
        self.trains = [p for p in pieces if p not in self.refused_pieces()
                       and any(c.get("slow") for c in selected(self.expected[p], limits))]
        self.done: dict[str, list[PieceRun]] = {p: [] for p in pieces}

    def refused_pieces(self) -> set[str]:
        return {p for p in self.pieces if f"{PIECES[p].module}.py" in self.refused}

    def _tell(self, piece: str, finished: bool = False) -> None:
        if self.progress:
            with self.shown:
                self.progress(piece, finished=finished)

    def run_units(self, piece: str, zygote: Zygote | None) -> None:
        """The piece's unit cases (all its cases in quick mode, or when it has no training case)."""
        self._tell(piece)
        why = self.refused.get(f"{PIECES[piece].module}.py")
        if why:
            self.done[piece].append(refused_run(piece, self.expected[piece], why, self.limits))
        else:
            self.done[piece].append(run_piece(piece, self.expected[piece], self.submission, self.ref, self.seed,
                                              self.limits, zygote, self.cases, part="units"))
        if piece not in self.trains:
            self._tell(piece, finished=True)

    def run_training(self, piece: str, zygote: Zygote | None) -> None:
        """The piece's training cases whose needs passed; the others fail, saying which unit cases to fix."""
        passed = {c.name for run in self.done[piece] for c in run.cases if c.passed}
        cases = selected(self.expected[piece], self.limits, "training")
        blocked = {c["case"]: [n for n in c.get("needs", ()) if n not in passed] for c in cases}
        blocked = {name: needs for name, needs in blocked.items() if needs}
        if len(blocked) < len(cases):
            on = (lambda event: self.training(piece, event)) if self.training else None
            run = run_piece(piece, self.expected[piece], self.submission, self.ref, self.seed, self.limits, zygote,
                            self.cases, on_progress=on, part="training")
        else:
            run = PieceRun(piece, [])
        run.cases = [c for c in run.cases if c.name not in blocked] + [
            CaseResult(c["case"], c["points"], False, not_trained(blocked[c["case"]]))
            for c in cases if c["case"] in blocked]
        self.done[piece].append(run)
        self._tell(piece, finished=True)

    def runs(self) -> list[PieceRun]:
        """One run per piece, in the order asked for, its cases in the manifest's order."""
        return [merged(p, self.done[p], self.expected[p]) for p in self.pieces]


def not_trained(needs: list[str]) -> str:
    names = " and ".join(f"'{report.title(n)}'" for n in needs)
    return (f"not run: the grader trains the model only once {names} pass{'' if len(needs) > 1 else 'es'}; "
            f"fix {'those cases' if len(needs) > 1 else 'that case'} first")


def merged(piece: str, parts: list[PieceRun], expected: list[dict]) -> PieceRun:
    """The parts of one piece's grade (its units, then its training) as one run."""
    if len(parts) == 1:
        return parts[0]
    by_name = {c.name: c for run in parts for c in run.cases}
    order = [c["case"] for c in expected if c["case"] in by_name]
    return PieceRun(
        piece, [by_name[n] for n in order], output="\n".join(r.output for r in parts if r.output),
        seconds=sum(r.seconds for r in parts), status=next((r.status for r in parts if r.status != "ok"), "ok"),
        jail=sorted({x for r in parts for x in r.jail}))


def grade(
    *, submission: Path, pieces: list[str], seed: str, limits: Limits, reference: Path | None = None,
    progress=None, zygote: Zygote | None = None, training=None,
) -> list[PieceRun]:
    """Grade `pieces` of `submission`; the score is computed here, from the manifest and signed records.

    With a zygote given everything runs one after another on it; otherwise the unit cases run one piece at a
    time, then the training cases side by side on up to two zygotes (each worker trains on one thread, so the
    numbers match a one-at-a-time run), and a grade takes about as long as its longest training case plus the
    unit cases. progress(piece) hears of each piece as it starts and progress(piece, finished=True) as it
    ends; training(piece, event) hears of a training case's chunks.
    """
    job = Grading(submission=submission, pieces=pieces, seed=seed, limits=limits, reference=reference,
                  progress=progress, training=training)
    if zygote is not None:
        for piece in job.order:
            job.run_units(piece, zygote)
        for piece in job.trains:
            job.run_training(piece, zygote)
        return job.runs()
    cores = os.cpu_count() or 1
    if not FORK_SERVERS:
        # Without fork every judge and worker is a fresh interpreter whose start dominates, and there is no jail
        # to keep pieces apart: two lanes for the units too.
        lanes = [None] * min(2, cores, len(pieces))
        _lanes(job.order, lanes, job.run_units)
        _lanes(job.trains, lanes, job.run_training)
        return job.runs()
    zygotes = [Zygote() for _ in range(max(1, min(2, cores, len(job.trains))))]  # the training lanes warm up meanwhile
    try:
        _lanes(job.order, zygotes[:1], job.run_units)
        _lanes(job.trains, zygotes, job.run_training)
    finally:
        for zyg in zygotes:
            zyg.close()
    return job.runs()


def _lanes(order: list, zygotes: list, one) -> None:
    """Call one(item, zygote) for each item of `order` on one lane per zygote (None: a fresh interpreter per
    piece), each lane taking the next item; an error in a lane is raised here once every lane has stopped."""
    todo = iter(order)
    take = threading.Lock()
    errors: list[BaseException] = []

    def lane(zyg) -> None:
        try:
            while not errors:
                with take:
                    item = next(todo, None)
                if item is None:
                    return
                one(item, zyg)
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
