"""`grade batch`: regrade a whole class in parallel into a CSV gradebook and one JSON report each.

The submissions are untrusted input to an unjailed process that has the reference beside it: they are
read through grader/verbs/intake.py (no links, capped sizes, notebooks and zips parsed in a capped child), every
row is named uniquely after its repository with its path beside it, every text cell is neutralised for
spreadsheets, and each row reaches the disk as it finishes.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.runner import report
from grader.runner.schedule import Grading
from grader.runner.stage import stage
from grader.verbs import release_files
from grader.verbs.intake import (
    LAB_FILES,
    MAX_ZIP,
    NOTEBOOK,
    Refused,
    is_link,
    no_link,
    parse,
    snapshot,
)
from grader.pieces import MODULES, PIECES, run_order
from grader.runner.launch import Zygote
from grader.runner.results import Limits

BadSubmission = Refused  # the name callers and tests know
EXERCISES = "exercises"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # and their full-width forms


# --- which submissions, named how ---------------------------------------------------------------

def holds_lab(folder: Path) -> bool:
    """A folder laid out like exercises/ (a lab file or the notebook, even a broken one or a link)."""
    return any(os.path.lexists(folder / name) for name in LAB_FILES)


def is_submission(path: Path) -> bool:
    """A .zip, a .ipynb, a folder laid out like exercises/ or a repository holding exercises/."""
    if not path.is_dir() or is_link(path):
        return True  # a file or a link is one submission (a link becomes an error row, never followed)
    return holds_lab(path) or os.path.lexists(path / EXERCISES)


def collect(paths: list[Path]) -> list[Path]:
    """The submissions given: each path is one; but where none of them is a submission or a git repository
    (the folder `gh classroom clone student-repos` writes, or one per section), each stands for its entries:
    folders, .zip and .ipynb files, one level, never deeper. The same path twice is graded once."""
    found: dict[str, Path] = {}
    # Only when no path given is a submission itself: a student's own folder given among others is one
    # row (an error row if it holds nothing), never a source of rows named after folders of its choosing.
    folders = not any(is_submission(p) or os.path.lexists(p / ".git") for p in paths)
    for path in paths:
        entries = [path]
        if folders:
            inner = sorted(p for p in path.iterdir() if not p.name.startswith(".")
                           and (p.is_dir() or p.suffix in (".zip", ".ipynb") or is_link(p)))
            entries = inner or [path]
        for p in entries:
            found.setdefault(os.path.normcase(os.path.abspath(p)), p)
    return list(found.values())


def base_name(path: Path) -> str:
    """The student a path stands for: the repository's folder for `repo/exercises` and `repo/exercises/lesson.ipynb`,
    a file's stem, else the folder's name."""
    parts = Path(os.path.abspath(path)).parts
    last = len(parts) - 1
    if parts[last] == NOTEBOOK and last > 0:
        last -= 1
    while last > 0 and parts[last] == EXERCISES:
        last -= 1
    name = parts[last]
    return name[: -len(Path(name).suffix)] if last == len(parts) - 1 and Path(name).suffix in (".zip", ".ipynb") else name


def slug(name: str) -> str:
    """A name safe as a file name everywhere and as a spreadsheet cell: [A-Za-z0-9._-], never leading . or -."""
    s = _UNSAFE.sub("_", name)[:80]
    s = re.sub(r"^[.-]", "_", s) or "student"
    return "_" + s if s.split(".")[0].upper() in _WINDOWS_RESERVED else s


def student_names(paths: list[Path]) -> dict[Path, str]:
    """A unique name per submission, the same for the same set of paths in any order: its slug, or where
    slugs collide (case aside: report files share a folder), the slug and -2, -3, ... in the order of paths."""
    slugs = {p: slug(base_name(p)) for p in paths}
    count: dict[str, int] = {}
    for s in slugs.values():
        count[s.lower()] = count.get(s.lower(), 0) + 1
    used = {s.lower() for s in slugs.values() if count[s.lower()] == 1}
    names = {p: s for p, s in slugs.items() if count[s.lower()] == 1}
    for p in sorted((p for p in paths if p not in names), key=lambda p: (os.path.abspath(p), str(p))):
        name, n = slugs[p], 1
        while name.lower() in used:
            n += 1
            name = f"{slugs[p]}-{n}"
        used.add(name.lower())
        names[p] = name
    return names


def student_name(path: Path) -> str:
    return slug(base_name(path))


# --- reading one submission ---------------------------------------------------------------------

def locate(path: Path) -> Path:
    """The folder laid out like exercises/ in a submission folder: a repository's exercises/ where it has one
    (what Classroom grades, whatever else lies at its root), else the folder itself."""
    inner = path / EXERCISES
    if os.path.lexists(inner):
        no_link(inner, f"{EXERCISES}/")
        if not inner.is_dir():
            raise Refused(f"{EXERCISES} is not a folder; the repository's exercises/ holds the lab's files")
        return inner
    if holds_lab(path):
        return path
    raise Refused(f"holds none of the lab's files ({', '.join(sorted(LAB_FILES))}) and no {EXERCISES}/ folder")


def unpack(path: Path, into: Path, notes: list[str] | None = None) -> Path:
    """The staged lab files of a folder (exercises/ or a repository holding it), a .zip or a notebook.

    As in `grade`, a folder's notebook that cannot be read (too big, broken, too costly to parse) leaves
    its .py files graded, and `notes` says why; a link anywhere refuses the whole submission."""
    walked = Path(os.path.abspath(path))  # never resolved: a link on the way is refused, not followed
    no_link(walked, "the submission")
    while walked.name in (EXERCISES, NOTEBOOK) and walked.parent != walked:  # repo/exercises/lesson.ipynb given
        walked = walked.parent
        no_link(walked, f"the folder {walked.name}")
    if path.is_dir():
        notes = [] if notes is None else notes
        folder = snapshot(locate(path), into / "snapshot", notes)
        if (folder / NOTEBOOK).is_file():  # the same rule as `grade`: an untouched stub's cell counts instead
            try:
                folder = parse("folder", folder, into / "parsed")
            except Refused as e:
                notes.append(f"{e}; graded: the .py files only")
    elif path.suffix in (".zip", ".ipynb"):
        from grader.verbs.intake import MAX_NOTEBOOK, read_regular

        cap = MAX_ZIP if path.suffix == ".zip" else MAX_NOTEBOOK
        data = read_regular(path, cap, path.name)
        if data is None:
            raise Refused(f"{path.name} is over {cap >> 20} MB; hand in the lab's files only")
        copy = into / "given" / ("submission.zip" if path.suffix == ".zip" else NOTEBOOK)
        copy.parent.mkdir(parents=True)
        copy.write_bytes(data)
        folder = parse(path.suffix[1:] if path.suffix == ".zip" else "notebook", copy, into / "parsed")
    else:
        raise Refused("expected a folder, a .zip or a .ipynb")
    if not any(os.path.lexists(folder / f"{m}.py") for m in MODULES):
        raise Refused("holds none of the lab's files")
    return stage(folder, into)


# --- the gradebook ------------------------------------------------------------------------------

def cell(value):
    """A CSV cell no spreadsheet runs: one line, and text that would start a formula behind a quote (OWASP)."""
    if not isinstance(value, str):
        return value
    text = re.sub(r"[\x00-\x1f\x7f]", " ", value)
    return "'" + text if text.lstrip().startswith(_FORMULA) else text


def error_row(name: str, message: str) -> dict:
    """A gradebook row for a submission that could not be graded: zero everywhere, and why (the reason may quote
    the submission: escaped as every report escapes it)."""
    return {"student": name, **{p: 0 for p in PIECES}, "total": 0, "max_score": None,
            "status": f"error: {report.safe(' '.join(message.split()), 300)}"}


class Gradebook:
    """The CSV, written a row at a time as each finishes (a crash keeps every finished row), then rewritten
    in order of student name, complete, in one atomic replace."""

    def __init__(self, out: Path, quick: bool) -> None:
        self.out, self.mode, self.rows, self.lock = out, "quick" if quick else "full", [], threading.Lock()
        self.fields = ["student", *PIECES, "total", "max_score", "status", "mode", "release_files", "path"]
        out.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(out, "w", newline="", encoding="utf-8")  # noqa: SIM115 - open across rows, closed in finish
        self.writer = csv.DictWriter(self.file, fieldnames=self.fields)
        self.writer.writeheader()
        self.file.flush()

    def _line(self, row: dict, max_score) -> dict:
        full = {**row, "max_score": row["max_score"] if row["max_score"] is not None else max_score, "mode": self.mode}
        return {k: cell(full.get(k, "")) for k in self.fields}

    def add(self, row: dict) -> None:
        with self.lock:
            self.rows.append(row)
            self.writer.writerow(self._line(row, ""))
            self.file.flush()

    def finish(self) -> None:
        self.file.close()
        rows = sorted(self.rows, key=lambda r: (r["student"].lower(), r["student"]))
        max_score = next((r["max_score"] for r in rows if r["max_score"] is not None), 0)
        tmp = self.out.with_name(self.out.name + ".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            # "quick" marks a gradebook without the training cases: its totals are not the grade
            writer = csv.DictWriter(f, fieldnames=self.fields)
            writer.writeheader()
            for r in rows:
                writer.writerow(self._line(r, max_score))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.out)


def main(
    *, submissions: list[Path], out: Path, reports: Path | None, jobs: int, seed: str, limits: Limits,
    progress: bool = True, release: Path | None = None,
) -> tuple[int, int]:
    """Grade every submission; returns (graded, unreadable). One broken submission never stops the batch.

    The class is graded piece by piece, as `grade` grades one submission: every student's unit cases of one
    piece (up to `jobs` at once, so the workers that run together hold the same reference), the pieces in
    `pieces.run_order`, and then every student's training cases, any beside any other (see check.Grading).
    """
    reports = reports or out.with_name(out.stem + "-reports")
    reports.mkdir(parents=True, exist_ok=True)
    dropped = drop_page_cache()
    if progress:
        print(dropped, file=sys.stderr)
    paths = collect(list(submissions))
    names = student_names(paths)
    digests = release_files.release_digests(release) if release else None
    book = Gradebook(out, limits.quick)
    local = threading.local()
    zygotes: list[Zygote] = []
    lock = threading.Lock()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(paths), desc="grading", unit="submission")

    def zygote() -> Zygote:
        """This thread's fork server, started at its first piece."""
        if not hasattr(local, "zygote"):
            local.zygote = Zygote()
            with lock:
                zygotes.append(local.zygote)
        return local.zygote

    def add(line: dict) -> None:
        book.add(line)
        if bar:
            bar.update(1)

    def checked(path: Path) -> tuple[str, list[str]]:
        """The release_files cell and the files it names: the repository's workflow, grader and data as given."""
        try:
            return release_files.column(path, digests)
        except OSError as e:
            return f"not checked ({e.strerror or e})", []

    def error(path: Path, e: BaseException) -> dict:
        """The row (and report) of a student who could not be graded: unreadable, or a grader fault."""
        name = names[path]
        cell_text, files = checked(path)
        if isinstance(e, Refused):
            data = {"student": name, "path": str(path), "error": report.safe(str(e), 500), "changed_release_files": files}
            (reports / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
            return {**error_row(name, str(e)), "path": str(path), "release_files": cell_text}
        return {**error_row(name, f"{type(e).__name__}: {e}"), "path": str(path), "release_files": cell_text}

    def graded(path: Path, job: Grading, notes: list[str]) -> dict:
        name = names[path]
        cell_text, files = checked(path)
        data = {**report.as_dict(job.runs(), student=name, seed=seed, quick=limits.quick), "path": str(path),
                "changed_release_files": files}
        notes = [report.safe(n, 400) for n in notes]  # a notebook's reason may quote its text
        if notes:
            data["notes"] = notes
        (reports / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
        status = "ok" + "".join(f": {n}" for n in notes)  # graded, and what was left out
        return {"student": name, **{p["name"]: p["score"] for p in data["pieces"]}, "total": data["score"],
                "max_score": data["max_score"], "status": " ".join(status.split())[:400], "path": str(path),
                "release_files": cell_text}

    with tempfile.TemporaryDirectory(prefix="attnlab-batch-") as tmp, \
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        live: dict[Path, tuple[Grading, list[str], Path]] = {}
        failed: dict[Path, BaseException] = {}  # a student whose grading raised: graded no further

        def read(i: int, path: Path) -> None:
            notes: list[str] = []
            into = Path(tmp) / str(i)
            try:
                into.mkdir()
                job = Grading(submission=unpack(path, into, notes), pieces=list(PIECES), seed=seed, limits=limits)
            except Exception as e:  # noqa: BLE001 - one unreadable submission is one error row
                add(error(path, e))
                shutil.rmtree(into, ignore_errors=True)
                return
            with lock:
                live[path] = (job, notes, into)

        def done(path: Path) -> None:
            with lock:
                job, notes, into = live.pop(path)
            e = failed.get(path)
            try:
                line = graded(path, job, notes) if e is None else error(path, e)
            except Exception as e2:  # noqa: BLE001 - still just this student's row
                line = error(path, e2)
            add(line)
            shutil.rmtree(into, ignore_errors=True)

        def attempt(path: Path, step: str, piece: str) -> None:
            """live[path]'s run_units or run_training of `piece`, unless that student already failed; a failure is
            recorded for the student's row, and grades nothing more of theirs."""
            if path in failed:
                return
            try:
                getattr(live[path][0], step)(piece, zygote())
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

        try:
            list(pool.map(read, range(len(paths)), paths))
            for piece in run_order(list(PIECES)):
                graded_now = [p for p in paths if p in live]
                list(pool.map(lambda path, piece=piece: attempt(path, "run_units", piece), graded_now))
            for path in [p for p in paths if p in live and (p in failed or not live[p][0].trains)]:
                done(path)
            left.update({p: len(live[p][0].trains) for p in paths if p in live})
            # one student's training cases back to back, so rows reach the disk as students finish
            list(pool.map(train, [(p, piece) for p in paths if p in live for piece in live[p][0].trains]))
        finally:
            if bar:
                bar.close()
            for z in zygotes:
                z.close()
    book.finish()
    bad = sum(1 for r in book.rows if r["status"].startswith("error"))
    return len(book.rows) - bad, bad


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
