"""`grade batch`: regrade a whole class in parallel into a CSV gradebook and one JSON report each.

The submissions are untrusted input to an unjailed process that has the reference beside it: they are
read through grader/regrade/intake.py (no links, capped sizes, notebooks and zips parsed in a capped child), every
row is named uniquely after its repository (with a roster, by username: grader/regrade/classlist.py) with its
path beside it, every text cell is neutralised for spreadsheets, and each row reaches the disk as it finishes.

`main` runs one `Batch`: plan (the class, its settings, the files beside the gradebook), launch (the class in
waves, each wave's students staged, graded piece by piece, then trained), collect (each student's row, as they
finish) and write (the gradebook, its manifest and the class reports, complete). A row's status is rowstatus.py's.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from grader.regrade import book, collect, deadline, perpush, staging
from grader.regrade.digests import inputs_digest, seed_digest, settings
from grader.regrade.journal import Journal
from grader.regrade.manifests import write_manifest
from grader.regrade import roster as rosters
from grader.regrade import scores as classroom50
from grader.regrade.classlist import ClassList, class_list
from grader.regrade.shard import Shard
from grader.runner import report
from grader.runner.schedule import Grading
from grader.regrade import release_files
from grader.regrade.intake import Refused, unpack
from grader.regrade.release_files import Verdict
from grader.regrade.rowstatus import error_text, ok_text, status_of
from grader.core.pieces import PIECES, run_order
from grader.runner import stops
from grader.runner.judge_servers import Stopped, JudgeServer
from grader.runner.launch import max_score
from grader.runner.results import Limits

if TYPE_CHECKING:
    from tqdm import tqdm

# Students a wave holds per job (`Batch.launch`): a wave's every piece waits for its slowest student's, so more waste
# more cores at each piece's end; a stop loses the wave under way, so fewer lose less.
WAVE = 2


class ReportsFolder(ValueError):
    """A --reports folder where the students' reports would meet the gradebook's own files."""
# --- the gradebook ------------------------------------------------------------------------------

def error_row(name: str, message: str, top: int | None = None) -> dict:
    """The row of a submission that could not be graded: zero everywhere, out of `top` (what a graded one is out
    of: max_score), and why (escaped, as in every report)."""
    return {"student": name, **{p: 0 for p in PIECES}, "total": 0, "max_score": top, "status": error_text(message)}



@dataclass
class Student:
    """One submission on its way through the batch."""

    path: Path
    name: str
    into: Path
    source: Path  # what is read: the repository, or its checkout at the deadline's commit
    notes: list[str] = field(default_factory=list)
    commit: deadline.Commit | None = None
    verdict: Verdict | None = None  # its release files' (release_files.verdict)
    inputs: str = ""
    job: Grading | None = None

    def commit_cells(self) -> dict:
        c = self.commit
        return {"commit": c.sha, "committed": c.time, "late": c.late} if c else {}


# --- one run ------------------------------------------------------------------------------------

class Batch:
    """One `grade batch` run (see `main`), step by step: `plan`, `launch` (which `stage`s, `attempt`s and `train`s
    each student), `collect` (a student's row, once they are done) and `write`. The pool's threads share its state
    under `lock`: `live`, `left`, `judge_servers` and `resumed`; `failed` is written only for a student no other thread
    is grading then."""

    # what `plan` lays down
    files: book.Files
    klass: ClassList  # this run's part of the class
    digests: dict[str, tuple[int, str]] | None  # the release's files (release_files.release_digests); None: no --release
    setting: dict  # everything besides a student's files that decides their row (digests.settings)
    top: int  # what a grade is out of (max_score), an error row's too
    manifest: dict  # what the manifest says of the run, beside its rows
    journal: Journal
    gradebook: book.Gradebook
    tmp: Path  # where the students are staged, while `launch` runs

    def __init__(self, *, submissions: list[Path], out: Path, reports: Path | None, jobs: int, seed: str,
                 limits: Limits, progress: bool = True, release: Path | None = None, shard: Shard | None = None,
                 before: datetime | None = None, roster: rosters.Roster | None = None, prefix: str = "",
                 scores: Path | None = None, disk: int | None = None, keys: perpush.Release | None = None,
                 known: list[Path] = ()) -> None:
        self.submissions, self.out, self.reports, self.jobs, self.keys = submissions, out, reports, jobs, keys
        self.known = list(known)  # the similarity report's known sources beside the reference
        self.seed, self.limits, self.progress, self.release = seed, limits, progress, release
        self.shard, self.before, self.roster, self.prefix, self.scores = shard, before, roster, prefix, scores
        self.lock, self.bound = threading.Lock(), staging.Bound(staging.DISK_BYTES if disk is None else disk)
        self.local = threading.local()  # each thread's fork server, started at its first piece
        self.judge_servers: list[JudgeServer] = []  # every thread's, closed at the end
        self.live: dict[Path, Student] = {}  # staged and still being graded
        self.failed: dict[Path, BaseException] = {}  # a student whose grading raised: graded no further
        self.left: dict[Path, int] = {}  # a training student's training cases still to run
        self.resumed = 0  # rows the journal held with the same inputs, taken as they were
        self.cache = staging.WaveCache(progress)
        self.bar: tqdm | None = None
        self.stop = stops.Stop()  # SIGTERM or SIGINT while `run` lasts: no row is written after it

    def run(self) -> tuple[int, int]:
        """Grade the class (or the shard's part of it); returns (graded, unreadable). Stopped by SIGTERM or SIGINT,
        it ends every process it started, keeps the rows it finished and exits (`halt`)."""
        with self.stop, tempfile.TemporaryDirectory(prefix="attnlab-batch-") as tmp:
            self.plan()
            self.tmp, pool = Path(tmp), ThreadPoolExecutor(max_workers=max(1, self.jobs))
            try:
                # launched on a thread of its own: the main thread, which alone hears signals, only waits
                running = stops.until_stopped(lambda: self.launch(pool), self.stop) if not self.stop.stopped else None
                if self.stop.stopped:
                    self.halt(pool, running)
            finally:
                if self.bar:
                    self.bar.close()
                for z in self.judge_servers:
                    z.close()
                pool.shutdown(wait=not self.stop.stopped, cancel_futures=self.stop.stopped)
        return self.write()

    def halt(self, pool: ThreadPoolExecutor, running: threading.Thread | None) -> None:
        """Stopped: every process the run started ended (stops.end_all), the students graded so far kept (their rows,
        the journal a rerun resumes from, a manifest that says the run did not finish), then one line and the exit."""
        stops.end_all(list(self.judge_servers), pool, running)  # copying a list is atomic: no lock a stuck thread holds
        with self.gradebook.lock:
            self.gradebook.finish()
        self.journal.close()
        rows = self.gradebook.rows
        write_manifest(self.files, rows=rows, finished=False, resumed=self.resumed, **self.manifest)
        if self.bar:
            self.bar.close()
        stops.leave(self.stop, len(rows), len(self.klass.paths) + len(self.klass.missing), self.files)

    # --- plan ---------------------------------------------------------------------------------------

    def plan(self) -> None:
        """The folders beside the gradebook, the class (this shard's part of it), the settings every row depends
        on, the journal a rerun resumes from and the manifest that says the run has begun."""
        self.files = files = book.Files.of(self.out, self.reports)
        taken = {files.csv.parent.resolve(), files.code.resolve()}
        if files.reports.resolve() in taken:  # a student named grades-manifest would write over the manifest
            raise ReportsFolder(f"--reports {files.reports} is the gradebook's own folder: its students' reports "
                                f"would meet its manifest and journal there; give a folder of their own, e.g. "
                                f"{files.csv.with_name(files.csv.stem + '-reports')}")
        files.reports.mkdir(parents=True, exist_ok=True)
        files.code.mkdir(parents=True, exist_ok=True)
        self.klass = klass = class_list(self.submissions, self.roster, self.prefix).part(self.shard)
        for line in klass.notes if self.progress else []:
            print(line, file=sys.stderr)
        self.digests = digests = release_files.release_digests(self.release) if self.release else None
        limits = self.limits
        self.top = max_score(list(PIECES), limits)
        self.setting = settings(
            seed=self.seed, quick=limits.quick, before=deadline.iso(self.before) if self.before else None,
            limits={"case_timeout": limits.case_timeout, "piece_timeout": limits.piece_timeout,
                    "memory_gb": limits.memory_gb},
            release=hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest() if digests else None,
            pieces=list(PIECES))
        part_of = [self.shard.k, self.shard.n] if self.shard else None
        self.journal = Journal(files.journal, {"shard": part_of, "class": klass.digest, **self.setting})
        self.manifest = dict(shard=part_of, names=klass.everyone, class_digest=klass.digest, setting=self.setting,
                             roster=klass.roster)
        write_manifest(files, rows=None, finished=False, **self.manifest)
        self.gradebook = book.Gradebook(files, limits.quick, list(PIECES), self.journal, per_push=self.keys is not None)
        if self.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=len(klass.paths) + len(klass.missing), unit="submission",
                            desc=f"grading{f' shard {self.shard}' if self.shard else ''}")

    # --- launch ---------------------------------------------------------------------------------------

    def launch(self, pool: ThreadPoolExecutor) -> None:
        """The class in waves of WAVE x jobs students (one wave where the page cache cannot be dropped between them:
        staging.WaveCache), one after another, each graded as `grade` grades one submission (`wave`); a wave's rows
        are written by its end, so a stop keeps every student of the waves before."""
        self.add_missing()
        self.cache.drop()
        paths, size = self.klass.paths, self.cache.wave(WAVE * max(1, self.jobs), len(self.klass.paths))
        for first in range(0, len(paths), size):
            if not self.stop.stopped:
                self.wave(pool, range(first, min(first + size, len(paths))))

    def wave(self, pool: ThreadPoolExecutor, ids: range) -> None:
        """The students `ids` staged, then every one's unit cases of one piece (up to `jobs` at once, so the workers
        that run together hold the same reference), the pieces in `pieces.run_order`, then every one's training
        cases, any beside any other (see grader/runner/schedule.py's Grading)."""
        if ids.start:  # the first wave's was dropped as the batch began
            self.cache.drop()
        paths = [self.klass.paths[i] for i in ids]
        list(pool.map(self.stage, ids, paths))
        for piece in run_order(list(PIECES)):
            graded_now = [p for p in paths if p in self.live]
            list(pool.map(lambda path, piece=piece: self.attempt(path, "run_units", piece), graded_now))
        for path in [p for p in paths if p in self.live and (p in self.failed or not self.live[p].job.trains)]:
            self.collect(path)
        self.left.update({p: len(self.live[p].job.trains) for p in paths if p in self.live})
        # one student's training cases back to back, so rows reach the disk as students finish
        list(pool.map(self.train, [(p, piece) for p in paths if p in self.live for piece in self.live[p].job.trains]))

    def add_missing(self) -> None:
        """The rows (and reports) of the roster's students in this part who have no repository to grade."""
        for name, why in sorted(self.klass.missing.items()):
            (self.files.reports / f"{name}.json").write_text(json.dumps({"student": name, "path": "", "error": why},
                                                                        indent=2) + "\n")
            staging.remove(self.files.code / name)
            verdict = Verdict.not_a_repository("no repository") if self.digests is not None else Verdict.no_release()
            self.add({**error_row(name, why, self.top), "path": "", "release_files": verdict.cell})

    def stage(self, i: int, path: Path) -> None:
        """One student made ready to grade (checked out at the deadline, unpacked, their release files checked and
        their code kept), and live; or their row at once: the journal's, for the same inputs, or an error row. Only
        while the staging in flight fits the disk budget (grader/regrade/staging.py); once staged, a student keeps
        only their lab files until their row is written."""
        with self.bound.hold(staging.worst_case(self.before is not None)):
            self.staged(Student(path, self.klass.names[path], self.tmp / str(i), path))

    def staged(self, s: Student) -> None:
        path, files = s.path, self.files
        try:
            s.into.mkdir()
            collect.refuse_cut(path)  # a repository `grade batch collect` left out for its size: its row says so
            if self.before:
                s.source, s.commit = deadline.checkout(path, self.before, s.into / "git")
                if s.commit.late:
                    s.notes.append(f"{s.commit.late} commit(s) after the deadline not graded")
            staged = unpack(s.source, s.into, s.notes)
            s.verdict = self.verdict(s.source)
            staging.keep_code(staged, files.code / s.name)
            staging.prune(s.into, staged)  # the clone, the checkout and the unpacking's copies: graded from `staged`
            s.inputs = inputs_digest(self.setting, staged, [*s.notes, s.commit.sha if s.commit else "",
                                                                 json.dumps([s.verdict.cell, list(s.verdict.files)])])
            kept = self.journal.reusable(s.name, s.inputs)
            if kept is not None and (files.reports / f"{s.name}.json").is_file():
                self.add(kept, s.inputs)  # graded before with these very inputs: the same row again
                with self.lock:
                    self.resumed += 1
                staging.remove(s.into)
                return
            s.job = Grading(submission=staged, pieces=list(PIECES), seed=self.seed, limits=self.limits)
        except Exception as e:  # noqa: BLE001 - one unreadable submission is one error row
            self.add(self.failed_row(s, e))
            staging.remove(s.into)
            staging.remove(files.code / s.name)  # nothing of theirs was graded
            return
        with self.lock:
            self.live[path] = s

    def verdict(self, source: Path) -> Verdict:
        """The verdict on the repository's workflow, grader and data as given (release_files.verdict)."""
        try:
            return release_files.verdict(source, self.digests)
        except OSError as e:
            return Verdict.not_checked(str(e.strerror or e))

    def judge_server(self) -> JudgeServer:
        """This thread's fork server, started at its first piece."""
        if not hasattr(self.local, "judge_server"):
            if self.stop.stopped:  # a thread past `attempt`'s check as the stop came: no server the stop missed
                raise Stopped("the run is stopping")
            self.local.judge_server = JudgeServer()
            with self.lock:
                self.judge_servers.append(self.local.judge_server)
        return self.local.judge_server

    def attempt(self, path: Path, step: str, piece: str) -> None:
        """live[path]'s run_units or run_training of `piece`, unless that student already failed; a failure is
        recorded for the student's row, and grades nothing more of theirs."""
        if path in self.failed or self.stop.stopped:
            return
        try:
            getattr(self.live[path].job, step)(piece, self.judge_server())
        except Exception as e:  # noqa: BLE001 - recorded for that student's row
            self.failed[path] = e

    def train(self, item: tuple[Path, str]) -> None:
        """One training case of a student's; after their last, their row."""
        path, piece = item
        try:
            self.attempt(path, "run_training", piece)
        finally:
            with self.lock:
                self.left[path] -= 1
                last = self.left[path] == 0
            if last:
                self.collect(path)

    # --- collect --------------------------------------------------------------------------------------

    def collect(self, path: Path) -> None:
        """A student done grading: their report and row written, their staged files gone (none once stopping)."""
        if self.stop.stopped or (isinstance(self.failed.get(path), Stopped) and self.stop.wait(5)):
            return
        with self.lock:
            s = self.live.pop(path)
        e = self.failed.get(path)
        inputs = ""
        try:
            line = self.graded_row(s) if e is None else self.failed_row(s, e)
            inputs = s.inputs if e is None else ""  # a grader fault is graded again on a rerun
        except Exception as e2:  # noqa: BLE001 - still just this student's row
            line = self.failed_row(s, e2)
        self.add(line, inputs)
        staging.remove(s.into)

    def add(self, line: dict, inputs: str = "") -> None:
        if self.stop.stopped:
            return  # a stop may have cut what this row says short: the rerun writes it
        if self.keys is not None:  # read afresh for every row, a resumed one too: the download may be newer
            line = {**line, "per_push": perpush.check(Path(line["path"]), self.keys).cell if line.get("path")
                    else "missing: no repository"}
        self.gradebook.add(line, inputs)
        if self.bar:
            self.bar.update(1)

    def failed_row(self, s: Student, e: BaseException) -> dict:
        """The row (and report) of a student who could not be graded: unreadable, or a grader fault."""
        verdict = s.verdict if s.verdict is not None else self.verdict(s.source)
        row = {"path": str(s.path), "release_files": verdict.cell, **s.commit_cells()}
        if isinstance(e, Refused):
            data = {"student": s.name, "path": str(s.path), "error": report.safe(str(e), 500),
                    "changed_release_files": list(verdict.files), **s.commit_cells()}
            (self.files.reports / f"{s.name}.json").write_text(json.dumps(data, indent=2) + "\n")
            return {**error_row(s.name, str(e), self.top), **row}
        return {**error_row(s.name, f"{type(e).__name__}: {e}", self.top), **row}

    def graded_row(self, s: Student) -> dict:
        """The row (and report) of a graded student."""
        verdict = s.verdict
        data = {**report.as_dict(s.job.runs(), student=s.name, seed_sha256=seed_digest(self.seed),
                                 quick=self.limits.quick),
                "path": str(s.path), "changed_release_files": list(verdict.files), **s.commit_cells()}
        notes = [report.safe(n, 400) for n in s.notes]  # a notebook's reason may quote its text
        if notes:
            data["notes"] = notes
        (self.files.reports / f"{s.name}.json").write_text(json.dumps(data, indent=2) + "\n")
        return {"student": s.name, **{p["name"]: p["score"] for p in data["pieces"]}, "total": data["score"],
                "max_score": data["max_score"], "status": ok_text(notes), "path": str(s.path),
                "release_files": verdict.cell, **s.commit_cells()}

    # --- write ----------------------------------------------------------------------------------------

    def write(self) -> tuple[int, int]:
        """The gradebook complete and sorted, the manifest finished, scores.csv and (a whole class) the class
        reports; returns (graded, unreadable)."""
        gradebook = self.gradebook
        gradebook.finish()
        self.journal.close()
        write_manifest(self.files, rows=gradebook.rows, finished=True, resumed=self.resumed, **self.manifest)
        if self.scores is not None:
            classroom50.write(self.scores, gradebook.rows, self.klass.roster, gradebook.mode)
        if self.shard is None:
            book.class_reports(self.files, gradebook.rows, self.progress, list(PIECES), gradebook.mode, self.known)
        bad = sum(status_of(r).is_error for r in gradebook.rows)
        return len(gradebook.rows) - bad, bad


def main(
    *, submissions: list[Path], out: Path, reports: Path | None, jobs: int, seed: str, limits: Limits,
    progress: bool = True, release: Path | None = None, shard: Shard | None = None, before: datetime | None = None,
    roster: rosters.Roster | None = None, prefix: str = "", scores: Path | None = None, disk: int | None = None,
    keys: perpush.Release | None = None, known: list[Path] = (),
) -> tuple[int, int]:
    """Grade every submission (or `shard`'s part of them); returns (graded, unreadable). One broken submission
    never stops the batch, and a rerun takes every row the journal holds for the same inputs as it is. With a
    `roster`, its students are the class (see class_list); `scores`: Classroom 50's scores.csv, too; `disk`: the
    bytes staging may hold at once (default staging.DISK_BYTES), each student at their worst case (staging.py);
    `keys`: a Classroom 50 release's attestation, and then each row's `per_push` is its per-push result's verdict;
    `known`: the similarity report's known sources beside the reference (book.class_reports).
    SIGTERM or SIGINT stops it: the rows it finished kept, it exits 143 or 130 (`Batch.halt`). The steps: `Batch`;
    the order of the pieces: `Batch.launch`."""
    return Batch(submissions=submissions, out=out, reports=reports, jobs=jobs, seed=seed, limits=limits,
                 progress=progress, release=release, shard=shard, before=before, roster=roster, prefix=prefix,
                 scores=scores, disk=disk, keys=keys, known=known).run()


def default_jobs() -> int:
    return os.cpu_count() or 1
