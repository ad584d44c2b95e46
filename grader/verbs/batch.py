"""`grade batch`: regrade a whole class in parallel into a CSV gradebook and one JSON report each.

The submissions are untrusted input to an unjailed process that has the reference beside it: they are
read through grader/regrade/intake.py (no links, capped sizes, notebooks and zips parsed in a capped child), every
row is named uniquely after its repository (with a roster, by username: grader/regrade/classlist.py) with its
path beside it, every text cell is neutralised for spreadsheets, and each row reaches the disk as it finishes.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.regrade import book, deadline
from grader.regrade import roster as rosters
from grader.regrade import scores as classroom50
from grader.regrade.book import cell  # noqa: F401 - the name callers and tests know
from grader.regrade.classlist import (  # noqa: F401 - the names callers and tests know
    EXERCISES,
    ClassList,
    base_name,
    class_list,
    collect,
    holds_lab,
    is_submission,
    slug,
    student_name,
    student_names,
)
from grader.regrade.shard import Shard
from grader.runner import report
from grader.runner.schedule import Grading
from grader.regrade import release_files
from grader.regrade.intake import Refused, unpack
from grader.pieces import MODULES, PIECES, run_order
from grader.runner.launch import Zygote
from grader.runner.results import Limits

BadSubmission = Refused  # the name callers and tests know


class ReportsFolder(ValueError):
    """A --reports folder where the students' reports would meet the gradebook's own files."""
# --- the gradebook ------------------------------------------------------------------------------

def error_row(name: str, message: str) -> dict:
    """A gradebook row for a submission that could not be graded: zero everywhere, and why (the reason may quote
    the submission: escaped as every report escapes it)."""
    return {"student": name, **{p: 0 for p in PIECES}, "total": 0, "max_score": None,
            "status": f"error: {report.safe(' '.join(message.split()), 300)}"}


@dataclass
class Student:
    """One submission on its way through the batch."""

    path: Path
    name: str
    into: Path
    source: Path  # what is read: the repository, or its checkout at the deadline's commit
    notes: list[str] = field(default_factory=list)
    commit: deadline.Commit | None = None
    checked: tuple[str, list[str]] = ("", [])  # the release_files cell and the files it names
    inputs: str = ""
    job: Grading | None = None

    def commit_cells(self) -> dict:
        c = self.commit
        return {"commit": c.sha, "committed": c.time, "late": c.late} if c else {}


def remove(path: Path) -> None:
    """rmtree, ignoring errors, and a tree too deep for its recursion too (one student's cleanup never stops the
    batch; deadline.py refuses checkouts that deep, this is the second guard)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass


def keep_code(staged: Path, into: Path) -> None:
    """The lab files that are graded, kept beside the gradebook for the similarity report."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for module in MODULES:
        src = staged / f"{module}.py"
        if src.is_file() and not src.is_symlink():
            shutil.copyfile(src, into / src.name)


def main(
    *, submissions: list[Path], out: Path, reports: Path | None, jobs: int, seed: str, limits: Limits,
    progress: bool = True, release: Path | None = None, shard: Shard | None = None, before: datetime | None = None,
    roster: rosters.Roster | None = None, prefix: str = "", scores: Path | None = None,
) -> tuple[int, int]:
    """Grade every submission (or `shard`'s part of them); returns (graded, unreadable). One broken submission
    never stops the batch, and a rerun takes every row the journal holds for the same inputs as it is. With a
    `roster`, its students are the class (see class_list); `scores`: Classroom 50's scores.csv, too.

    The class is graded piece by piece, as `grade` grades one submission: every student's unit cases of one
    piece (up to `jobs` at once, so the workers that run together hold the same reference), the pieces in
    `pieces.run_order`, and then every student's training cases, any beside any other (see check.Grading).
    """
    files = book.Files.of(out, reports)
    taken = {files.csv.parent.resolve(), files.code.resolve()}
    if files.reports.resolve() in taken:  # a student named grades-manifest would write over the manifest
        raise ReportsFolder(f"--reports {files.reports} is the gradebook's own folder: its students' reports "
                         f"would meet its manifest and journal there; give a folder of their own, e.g. "
                         f"{files.csv.with_name(files.csv.stem + '-reports')}")
    files.reports.mkdir(parents=True, exist_ok=True)
    files.code.mkdir(parents=True, exist_ok=True)
    dropped = drop_page_cache()
    if progress:
        print(dropped, file=sys.stderr)
    whole = class_list(submissions, roster, prefix)
    klass = whole.part(shard)
    paths, names, everyone = klass.paths, klass.names, klass.everyone
    for line in klass.said if progress else []:
        print(line, file=sys.stderr)
    digests = release_files.release_digests(release) if release else None
    setting = book.settings(
        seed=seed, quick=limits.quick, before=deadline.iso(before) if before else None,
        limits={"case_timeout": limits.case_timeout, "piece_timeout": limits.piece_timeout, "memory_gb": limits.memory_gb},
        release=hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest() if digests else None,
        pieces=list(PIECES))
    part_of = [shard.k, shard.n] if shard else None
    journal = book.Journal(files.journal, {"shard": part_of, "class": klass.digest, **setting})
    manifest = dict(shard=part_of, names=everyone, class_digest=klass.digest, setting=setting, roster=klass.roster)
    book.write_manifest(files, rows=None, finished=False, **manifest)
    gradebook = book.Gradebook(files, limits.quick, list(PIECES), journal)
    local = threading.local()
    zygotes: list[Zygote] = []
    lock = threading.Lock()
    resumed = [0]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(paths) + len(klass.missing), desc=f"grading{f' shard {shard}' if shard else ''}", unit="submission")

    def zygote() -> Zygote:
        """This thread's fork server, started at its first piece."""
        if not hasattr(local, "zygote"):
            local.zygote = Zygote()
            with lock:
                zygotes.append(local.zygote)
        return local.zygote

    def add(line: dict, inputs: str = "") -> None:
        gradebook.add(line, inputs)
        if bar:
            bar.update(1)

    def checked(source: Path) -> tuple[str, list[str]]:
        """The release_files cell and the files it names: the repository's workflow, grader and data as given."""
        try:
            return release_files.column(source, digests)
        except OSError as e:
            return f"not checked ({e.strerror or e})", []

    def error(s: Student, e: BaseException) -> dict:
        """The row (and report) of a student who could not be graded: unreadable, or a grader fault."""
        cell_text, files_changed = s.checked if s.checked[0] else checked(s.source)
        row = {"path": str(s.path), "release_files": cell_text, **s.commit_cells()}
        if isinstance(e, Refused):
            data = {"student": s.name, "path": str(s.path), "error": report.safe(str(e), 500),
                    "changed_release_files": files_changed, **s.commit_cells()}
            (files.reports / f"{s.name}.json").write_text(json.dumps(data, indent=2) + "\n")
            return {**error_row(s.name, str(e)), **row}
        return {**error_row(s.name, f"{type(e).__name__}: {e}"), **row}

    def graded(s: Student) -> dict:
        cell_text, files_changed = s.checked
        data = {**report.as_dict(s.job.runs(), student=s.name, seed=seed, quick=limits.quick), "path": str(s.path),
                "changed_release_files": files_changed, **s.commit_cells()}
        notes = [report.safe(n, 400) for n in s.notes]  # a notebook's reason may quote its text
        if notes:
            data["notes"] = notes
        (files.reports / f"{s.name}.json").write_text(json.dumps(data, indent=2) + "\n")
        status = "ok" + "".join(f": {n}" for n in notes)  # graded, and what was left out
        return {"student": s.name, **{p["name"]: p["score"] for p in data["pieces"]}, "total": data["score"],
                "max_score": data["max_score"], "status": " ".join(status.split())[:400], "path": str(s.path),
                "release_files": cell_text, **s.commit_cells()}

    with tempfile.TemporaryDirectory(prefix="attnlab-batch-") as tmp, \
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        live: dict[Path, Student] = {}
        failed: dict[Path, BaseException] = {}  # a student whose grading raised: graded no further

        def read(i: int, path: Path) -> None:
            s = Student(path, names[path], Path(tmp) / str(i), path)
            try:
                s.into.mkdir()
                if before:
                    s.source, s.commit = deadline.checkout(path, before, s.into / "git")
                    if s.commit.late:
                        s.notes.append(f"{s.commit.late} commit(s) after the deadline not graded")
                staged = unpack(s.source, s.into, s.notes)
                s.checked = checked(s.source)
                keep_code(staged, files.code / s.name)
                s.inputs = book.inputs_digest(setting, staged, [*s.notes, s.commit.sha if s.commit else "",
                                                                json.dumps(s.checked)])
                kept = journal.reusable(s.name, s.inputs)
                if kept is not None and (files.reports / f"{s.name}.json").is_file():
                    add(kept, s.inputs)  # graded before with these very inputs: the same row again
                    with lock:
                        resumed[0] += 1
                    remove(s.into)
                    return
                s.job = Grading(submission=staged, pieces=list(PIECES), seed=seed, limits=limits)
            except Exception as e:  # noqa: BLE001 - one unreadable submission is one error row
                add(error(s, e))
                remove(s.into)
                remove(files.code / s.name)  # nothing of theirs was graded
                return
            with lock:
                live[path] = s

        def done(path: Path) -> None:
            with lock:
                s = live.pop(path)
            e = failed.get(path)
            inputs = ""
            try:
                line = graded(s) if e is None else error(s, e)
                inputs = s.inputs if e is None else ""  # a grader fault is graded again on a rerun
            except Exception as e2:  # noqa: BLE001 - still just this student's row
                line = error(s, e2)
            add(line, inputs)
            remove(s.into)

        def attempt(path: Path, step: str, piece: str) -> None:
            """live[path]'s run_units or run_training of `piece`, unless that student already failed; a failure is
            recorded for the student's row, and grades nothing more of theirs."""
            if path in failed:
                return
            try:
                getattr(live[path].job, step)(piece, zygote())
            except Exception as e:  # noqa: BLE001 - recorded for that student's row
                failed[path] = e

        left: dict[Path, int] = {}

        def train(item: tuple[Path, str]) -> None:
            path, piece = item
            try:
                attempt(path, "run_training", piece)
            finally:
                with lock:
                    left[path] -= 1
                    last = left[path] == 0
                if last:
                    done(path)

        for name, why in sorted(klass.missing.items()):  # on the roster, and no repository to grade
            (files.reports / f"{name}.json").write_text(json.dumps({"student": name, "path": "", "error": why},
                                                                   indent=2) + "\n")
            remove(files.code / name)
            add({**error_row(name, why), "path": "",
                 "release_files": "n/a (no repository)" if digests is not None else "not checked (no --release)"})
        try:
            list(pool.map(read, range(len(paths)), paths))
            for piece in run_order(list(PIECES)):
                graded_now = [p for p in paths if p in live]
                list(pool.map(lambda path, piece=piece: attempt(path, "run_units", piece), graded_now))
            for path in [p for p in paths if p in live and (p in failed or not live[p].job.trains)]:
                done(path)
            left.update({p: len(live[p].job.trains) for p in paths if p in live})
            # one student's training cases back to back, so rows reach the disk as students finish
            list(pool.map(train, [(p, piece) for p in paths if p in live for piece in live[p].job.trains]))
        finally:
            if bar:
                bar.close()
            for z in zygotes:
                z.close()
    gradebook.finish()
    journal.close()
    book.write_manifest(files, rows=gradebook.rows, finished=True, resumed=resumed[0], **manifest)
    if scores is not None:
        classroom50.write(scores, gradebook.rows, klass.roster, gradebook.mode)
    if shard is None:
        book.class_reports(files, gradebook.rows, progress, list(PIECES))
    bad = sum(1 for r in gradebook.rows if r["status"].startswith("error"))
    return len(gradebook.rows) - bad, bad


def drop_page_cache() -> str:
    """Empty the kernel's page cache where this process may (root on Linux), so that no earlier run's workers
    (an earlier batch, `grade --plots`) left bits in it for this batch's; says which it was."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:  # opened first: no machine-wide sync where it cannot drop
            os.sync()  # dirty pages are written back first, so the drop leaves none behind
            f.write("1\n")
        return "page cache dropped: nothing an earlier run left in it reaches this batch"
    except OSError as e:
        return (f"page cache kept ({e.strerror or e}): run the batch as root on a machine of its own to have it "
                "dropped; see the README's threat model")


def default_jobs() -> int:
    return os.cpu_count() or 1
