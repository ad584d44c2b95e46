"""The order a submission's pieces are graded in, and the lanes they run on: see `Grading`. A lane is a thread that
takes the next piece in turn and runs its judge on the lane's own judges' fork server
(grader.runner.judge_servers.JudgeServer), so that two lanes grade two pieces side by side."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from grader.core.host import FORK_SERVERS, StartError
from grader.core.pieces import PIECES, holds, run_order
from grader.runner import layout, manifest, report
from grader.runner.launch import run_piece, selected
from grader.runner.judge_servers import JudgeServer
from grader.runner.results import CaseResult, Limits, PieceRun, Status
from grader.runner.stage import REFUSED


# The training pieces in the order the lanes take them: the decoder's on the first lane, whose workers' server
# imports what training needs (torch._dynamo, about a second) at that case's start, Luong's, whose steps cost
# about 1.2x the decoder's, on the second (the twin), whose workers' server imported it beside the timed piece.
LANE_ORDER = ("decoder", "luong")


class Grading:
    """One submission's grade as it is built: every piece's unit cases first, each piece after the pieces whose
    reference its worker holds have ended (`pieces.holds`), two pieces at a time but the timed one alone, then
    the training cases, which may run side by side (with each other, or a batch's other students') and only once
    the unit cases they `need` passed.

    Two workers that run at once, or one after another, can pass data through state the machine keeps (the
    page cache: see docs/threat-model.md). So no unit run may meet a worker that holds its piece's
    answer, and a training case, which holds the lab's training code, earns nothing its piece's own code did
    not already show in its unit run.
    """

    def __init__(self, *, submission: Path, pieces: list[str], seed: str, limits: Limits,
                 reference: Path | None = None, progress=None, training=None) -> None:
        where = layout.current()
        self.submission, self.pieces, self.seed, self.limits = submission, pieces, seed, limits
        self.expected = manifest.read(where.manifest)
        stale = [p for p in pieces if p not in self.expected]
        if stale:  # never a traceback, nor a piece silently worth nothing
            raise StartError(f"{where.manifest} has no entry for {', '.join(map(repr, stale))}: it is out of date "
                             "(an instructor rebuilds it with `grade generate`)")
        self.ref, self.cases = reference or where.reference, where.cases
        self.refused = json.loads((submission / REFUSED).read_text()) if (submission / REFUSED).is_file() else {}
        self.progress, self.training, self.shown = progress, training, threading.Lock()
        self.order = run_order(pieces)
        self.trains = sorted((p for p in pieces if p not in self.refused_pieces()
                              and any(c.get("slow") for c in selected(self.expected[p], limits))),
                             key=lambda p: LANE_ORDER.index(p) if p in LANE_ORDER else len(LANE_ORDER))
        self.done: dict[str, list[PieceRun]] = {p: [] for p in pieces}

    def refused_pieces(self) -> set[str]:
        return {p for p in self.pieces if f"{PIECES[p].module}.py" in self.refused}

    def _tell(self, piece: str, finished: bool = False) -> None:
        if self.progress:
            with self.shown:
                self.progress(piece, finished=finished)

    def run_units(self, piece: str, judge_server: JudgeServer | None) -> None:
        """The piece's unit cases (all its cases in quick mode, or when it has no training case)."""
        self._tell(piece)
        why = self.refused.get(f"{PIECES[piece].module}.py")
        if not self.expected.get(piece):  # a piece without public checks (grader/public/ has no file for it)
            self.done[piece].append(PieceRun(piece, []))
        elif why:
            self.done[piece].append(refused_run(piece, self.expected[piece], why, self.limits))
        else:
            self.done[piece].append(run_piece(piece, self.expected[piece], self.submission, self.ref, self.seed,
                                              self.limits, judge_server, self.cases, part="units"))
        if piece not in self.trains:
            self._tell(piece, finished=True)

    def run_training(self, piece: str, judge_server: JudgeServer | None) -> None:
        """The piece's training cases whose needs passed; the others fail, saying which unit cases to fix."""
        passed = {c.name for run in self.done[piece] for c in run.cases if c.passed}
        cases = selected(self.expected[piece], self.limits, "training")
        blocked = {c["case"]: [n for n in c.get("needs", ()) if n not in passed] for c in cases}
        blocked = {name: needs for name, needs in blocked.items() if needs}
        if len(blocked) < len(cases):
            on = (lambda event: self.training(piece, event)) if self.training else None
            run = run_piece(piece, self.expected[piece], self.submission, self.ref, self.seed, self.limits,
                            judge_server, self.cases, on_progress=on, part="training")
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
    titles = [f"'{report.title(n)}'" for n in needs]
    names = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
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
        seconds=sum(r.seconds for r in parts),
        status=next((r.status for r in parts if r.status != Status.OK), Status.OK),
        jail=sorted({x for r in parts for x in r.jail}), withheld=max((r.withheld for r in parts), key=len))


def grade(
    *, submission: Path, pieces: list[str], seed: str, limits: Limits, reference: Path | None = None,
    progress=None, judge_server: JudgeServer | None = None, training=None, first: JudgeServer | None = None,
) -> list[PieceRun]:
    """Grade `pieces` of `submission`; the score is computed here, from the manifest and signed records.

    With `judge_server` given everything runs one after another on it; otherwise on two lanes: a judges' server and
    its twin (JudgeServer.twin), forked from it once it is ready. The unit cases run as `lanes` allows them (`pieces.holds`, the
    timed piece alone), then the training cases side by side (each worker trains on one thread, so the numbers
    match a one-at-a-time run). `first`: the first lane's server, started by start_server() while the caller
    prepared; grade closes it.
    progress(piece) hears of each piece as it starts and progress(piece, finished=True) as it ends; training(piece,
    event) hears of a training case's chunks.
    """
    job = Grading(submission=submission, pieces=pieces, seed=seed, limits=limits, reference=reference,
                  progress=progress, training=training)
    own: list[JudgeServer] = []
    width = min(2, os.cpu_count() or 1, len(pieces))  # lanes
    if judge_server is not None:
        judge_servers = [judge_server]
    elif not FORK_SERVERS:
        # Without fork every judge and worker is a fresh interpreter whose start dominates, and there is no jail
        # to keep pieces apart: two lanes, each a fresh interpreter per piece.
        judge_servers = [None] * width
    else:
        own = [first or JudgeServer()]
        first = None
        if width > 1:
            # the second lane's workers' server imports what training needs at once, beside the first lane's
            # timed piece; the first lane's, at its first training worker (the decoder's, the shorter case)
            own += filter(None, [own[0].twin(trains=bool(job.trains))])
        judge_servers = own
    if first is not None:  # not the server of this run's lanes
        first.kill()
    try:
        lanes(unit_order(job.order), judge_servers, job.run_units,
              waits=lambda p: [h for h in holds(p) if h in job.order], alone=lambda p: PIECES[p].timed)
        lanes(job.trains, judge_servers, job.run_training)
    finally:
        for zyg in reversed(own):  # the twin first: it dies with the server it was forked from
            zyg.close()
    return job.runs()


def start_server() -> JudgeServer | None:
    """The first lane's judges' server, started now: it imports torch (about a second) while the caller prepares
    the run; pass it to grade as `first`, or kill it. None where grade starts none (no fork)."""
    return JudgeServer() if FORK_SERVERS else None


def unit_order(order: list[str]) -> list[str]:
    """The order the unit runs are offered to the lanes: a timed piece that waits for none first (it runs alone, so
    it goes while the other lane has nothing else it could run), then `order`."""
    first = [p for p in order if PIECES[p].timed and not holds(p)]
    return first + [p for p in order if p not in first]


def lanes(order: list, judge_servers: list, one, waits=lambda item: [], alone=lambda item: False) -> None:
    """Call one(item, judge_server) for each item of `order` on one lane per judge_server (None: a fresh interpreter per
    piece). A lane takes the first item left whose `waits(item)` are done, never one that is `alone` beside
    another, nor any beside one that is; the lanes' first items are dealt before they start, so which lane runs
    which is the same every run. An error in a lane is raised here once every lane has stopped.

    Units: a piece waits for the pieces whose reference its worker holds (`pieces.holds`), so no worker that holds
    a piece's answer exists before that piece's unit run has ended (docs/threat-model.md), as one after another."""
    todo, running, done = list(order), set(), set()
    errors: list[BaseException] = []
    turn = threading.Condition()
    judge_servers = judge_servers or [None]

    def take():  # under `turn`
        for item in todo:
            if all(w in done for w in waits(item)) and (
                    not running if alone(item) else not any(alone(r) for r in running)):
                todo.remove(item)
                running.add(item)
                return item
        return None

    def lane(zyg, item) -> None:
        while True:
            with turn:
                while item is None:
                    if errors or not todo:
                        return
                    item = take()
                    if item is None:
                        turn.wait()
            try:
                one(item, zyg)
            except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread below
                with turn:
                    errors.append(e)
                    turn.notify_all()
                return
            with turn:
                running.discard(item)
                done.add(item)
                item = None
                turn.notify_all()

    with turn:
        dealt = [(zyg, take()) for zyg in judge_servers]
    if len(dealt) == 1:
        lane(*dealt[0])
    else:
        threads = [threading.Thread(target=lane, args=pair, daemon=True) for pair in dealt]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


def refused_run(piece: str, expected: list[dict], why: str, limits: Limits) -> PieceRun:
    cases = [CaseResult(c["case"], c["points"], False, why) for c in selected(expected, limits)]
    return PieceRun(piece, cases)
