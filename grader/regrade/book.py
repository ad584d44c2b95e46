"""The regrade's files beside a gradebook: the CSV itself, the shard's manifest and the journal a rerun resumes from.

`grade batch --out DIR/grades.csv` writes, in DIR:
- grades.csv: one row a student, in order of name (written as rows finish, then rewritten sorted);
- grades-reports/<student>.json and grades-code/<student>/<module>.py (the code that was graded);
- grades-journal.jsonl: every finished row with the digest of its inputs, appended and flushed as it
  finishes, so that a rerun of a killed run grades only what is left;
- grades-manifest.json: what run it was (the shard, the class list's digest, the grader's and the cases'
  digests, the seed's digest: the seed itself is secret) and every student's row and how it ended (and, with
  --roster, its students' roster details, for the Classroom 50 scores.csv);
- with --scores-csv PATH, the gradebook again with Classroom 50's scores.csv columns (grader/regrade/scores.py).
The merge (grader/verbs/merge.py) checks the manifests agree and writes the same CSV from their rows.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from grader import ROOT
from grader.regrade.rowstatus import status_of

FORMAT = 1
MAX_MANIFEST = 256 << 20  # bytes: a class of thousands' rows, with room
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # and their full-width forms
def fields(pieces: list[str], per_push: bool = False) -> list[str]:
    """The gradebook's columns: a column a piece graded; `per_push` (grade batch --verify): beside the regrade's
    score, the verdict on the student's per-push Classroom 50 result (grader/regrade/perpush.py)."""
    return ["student", *pieces, "total", "max_score", *(["per_push"] if per_push else []), "status", "mode", "commit",
            "committed", "late", "release_files", "path"]


@dataclass(frozen=True)
class Files:
    """Where a gradebook's companions lie."""

    csv: Path
    reports: Path

    @classmethod
    def of(cls, out: Path, reports: Path | None = None) -> Files:
        return cls(out, reports or out.with_name(out.stem + "-reports"))

    def _beside(self, suffix: str) -> Path:
        return self.csv.with_name(self.csv.stem + suffix)

    @property
    def code(self) -> Path:
        return self._beside("-code")

    @property
    def manifest(self) -> Path:
        return self._beside("-manifest.json")

    @property
    def journal(self) -> Path:
        return self._beside("-journal.jsonl")

    @property
    def similarity(self) -> Path:
        return self._beside("-similarity.html")

    @property
    def classreport(self) -> Path:
        return self._beside("-class.html")


# --- the CSV ----------------------------------------------------------------------------------------

def cell(value):
    """A CSV cell no spreadsheet runs: one line, and text that would start a formula behind a quote (OWASP)."""
    if not isinstance(value, str):
        return value
    text = re.sub(r"[\x00-\x1f\x7f]", " ", value)
    return "'" + text if text.lstrip().startswith(_FORMULA) else text


def line(row: dict, max_score, mode: str, columns: list[str]) -> dict:
    full = {**row, "max_score": row["max_score"] if row.get("max_score") is not None else max_score, "mode": mode}
    return {k: cell(full.get(k, "")) for k in columns}


def order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["student"].lower(), r["student"]))


def write_csv(out: Path, rows: list[dict], mode: str, pieces: list[str]) -> None:
    """The complete gradebook in order of student name, in one atomic replace; the same rows give the same bytes."""
    rows = order(rows)
    max_score = next((r["max_score"] for r in rows if r.get("max_score") is not None), 0)
    tmp, columns = out.with_name(out.name + ".tmp"), fields(pieces, any("per_push" in r for r in rows))
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for r in rows:
            writer.writerow(line(r, max_score, mode, columns))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)


class Gradebook:
    """The CSV, a row at a time as each finishes (a crash keeps every finished row), then rewritten complete;
    each row also goes to the journal with the digest of what was graded, so a rerun can take it as it is."""

    def __init__(self, files: Files, quick: bool, pieces: list[str], journal: Journal | None = None,
                 per_push: bool = False) -> None:
        self.files, self.mode, self.rows, self.lock = files, "quick" if quick else "full", [], threading.Lock()
        self.journal, self.pieces, self.columns = journal, pieces, fields(pieces, per_push)
        files.csv.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(files.csv, "w", newline="", encoding="utf-8")  # noqa: SIM115 - closed in finish
        self.writer = csv.DictWriter(self.file, fieldnames=self.columns)
        self.writer.writeheader()
        self.file.flush()

    def add(self, row: dict, inputs: str = "") -> None:
        with self.lock:
            self.rows.append(row)
            self.writer.writerow(line(row, "", self.mode, self.columns))
            self.file.flush()
            if self.journal and inputs:
                self.journal.append(row, inputs)

    def finish(self) -> None:
        self.file.close()
        write_csv(self.files.csv, self.rows, self.mode, self.pieces)


# --- what a run was -------------------------------------------------------------------------------

def _hash_files(h, paths: list[tuple[str, Path]]):
    """`h` updated with each (name, file) in order of name: its name, size and bytes."""
    for name, path in sorted(paths):
        h.update(f"{name}\0{path.stat().st_size}\0".encode())
        h.update(path.read_bytes())
    return h


def _tree_digest(paths: list[tuple[str, Path]]) -> str:
    return _hash_files(hashlib.sha256(), paths).hexdigest()


def _folder_files(folder: Path, pattern: str = "*") -> list[tuple[str, Path]]:
    """Every regular file under `folder` matching `pattern` (caches aside), named relative to it."""
    if not folder.is_dir():
        return []
    return [(p.relative_to(folder).as_posix(), p) for p in folder.rglob(pattern)
            if "__pycache__" not in p.parts and p.suffix != ".pyc" and p.is_file() and not p.is_symlink()]


def grader_digest() -> str:
    """The grader's own code: every .py file of the package."""
    return _tree_digest(_folder_files(ROOT / "grader", "*.py"))


def artifacts_digest() -> str:
    """The small trained models the cases start from and compare with (grader/artifacts: the warm starts, the
    evaluated model, their checksums): `grade artifacts` retrains them, and a training case's score follows them."""
    from grader.lab import artifacts

    return _tree_digest(_folder_files(artifacts.DIR))


def data_digest() -> str:
    """The toy task's splits the grader trains and tests on (datasets/toy_translation)."""
    from grader.core import datasets

    return _tree_digest(_folder_files(datasets.DATA_DIR))


def runtime() -> dict:
    """The versions a score can follow: Python's, and PyTorch's and NumPy's as this process loaded them (the
    workers fork from it), else as installed."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("torch", "numpy"):
        loaded = sys.modules.get(name)
        try:
            found[name] = str(getattr(loaded, "__version__", None) or version(name))
        except PackageNotFoundError:
            found[name] = "none"
    return found


def cases_digest() -> str:
    """What a grade is measured against: the hidden cases, their manifest and the reference."""
    from grader.runner import layout

    where = layout.current()
    files = [(f"cases/{p.name}", p) for p in where.cases.glob("*.py")] + [("manifest.json", where.manifest)]
    if where.reference:
        files += [(f"reference/{p.name}", p) for p in where.reference.glob("*.py")]
    return _tree_digest(files)


def settings(*, seed: str, quick: bool, limits: dict, before: str | None, release: str | None,
             pieces: list[str]) -> dict:
    """Everything besides a student's own files that decides their row: two runs with equal settings give a
    student with the same files the same row. That is the grader (its code, artifacts, data and the Python,
    PyTorch and NumPy versions), the hidden cases with their manifest and the reference, the seed, the mode, the
    limits, the pieces, the deadline and the release."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release_version = version("attention-lab")
    except PackageNotFoundError:
        release_version = "unknown"
    return {
        # the grader's code, the artifacts it starts the training cases from, its data and the versions it runs
        # on: a rerun after `grade artifacts`, with other data or another torch regrades (the merge compares it whole)
        "grader": {"version": release_version, "digest": grader_digest(), "artifacts": artifacts_digest(),
                   "data": data_digest(), "runtime": runtime()},
        "cases": cases_digest(),
        "seed": hashlib.sha256(seed.encode()).hexdigest(),  # the seed is secret; its digest tells runs apart
        "mode": "quick" if quick else "full",
        "limits": limits,
        "pieces": pieces,
        "before": before,
        "release": release,
    }


def inputs_digest(setting: dict, folder: Path, extra: list[str]) -> str:
    """One student's inputs: the settings, every file staged for grading and what was said of them."""
    h = _hash_files(hashlib.sha256(json.dumps(setting, sort_keys=True).encode()),
                    [(p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()])
    for note in extra:
        h.update(f"\0{note}".encode())
    return h.hexdigest()


class Journal:
    """Rows as they finish, one JSON object a line, with the digest of their inputs. A rerun with the same
    settings reads it back; with other settings (another seed, grader, shard) it starts a new one."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path, self.header = path, header
        self.done: dict[str, tuple[str, dict]] = {}
        kept = self._read()
        if kept is None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps({"header": header}, sort_keys=True) + "\n")
        else:
            self.done = kept
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close

    def _read(self) -> dict[str, tuple[str, dict]] | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read(MAX_MANIFEST).splitlines()
        except (OSError, UnicodeDecodeError):
            return None
        try:
            if json.loads(lines[0]) != {"header": json.loads(json.dumps(self.header, sort_keys=True))}:
                return None
        except (IndexError, ValueError):
            return None
        done = {}
        for text in lines[1:]:
            try:
                entry = json.loads(text)
                done[entry["row"]["student"]] = (entry["inputs"], entry["row"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by the kill: that student is graded again
        return done

    def reusable(self, name: str, inputs: str) -> dict | None:
        """The row of `name` if it was finished with these very inputs."""
        kept = self.done.get(name)
        return kept[1] if kept and kept[0] == inputs else None

    def append(self, row: dict, inputs: str) -> None:
        self.file.write(json.dumps({"inputs": inputs, "row": row}, sort_keys=True) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


def write_manifest(files: Files, *, shard: tuple[int, int] | None, names: list[str], class_digest: str,
                   setting: dict, rows: list[dict] | None, finished: bool, resumed: int = 0,
                   roster: dict[str, dict] | None = None) -> None:
    """The manifest of a run (rows None: still running); `roster`: its students' roster details (username, names,
    email, section, order), for the Classroom 50 scores.csv a merge writes."""
    data = {
        "format": FORMAT,
        "shard": list(shard) if shard else None,
        "class": {"digest": class_digest, "students": sorted(names)},
        **setting,
        "finished": finished,
        "gradebook": files.csv.name,
        "reports": os.path.relpath(files.reports, files.manifest.parent),
        "code": files.code.name,
        "resumed": resumed,
        "students": {r["student"]: {"ended": status_of(r).ended, "row": r} for r in order(rows or [])},
    }
    if roster is not None:
        data["roster"] = roster
    tmp = files.manifest.with_name(files.manifest.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, files.manifest)


# --- a whole class's companions, and a sharded run's parts ---------------------------------------

def class_reports(files: Files, rows: list[dict], progress: bool = True, pieces: list[str] | None = None,
                  mode: str | None = None) -> str:
    """The similarity report and the class report beside a whole class's gradebook (its pieces: every piece unless
    `pieces` names them; `mode`: the run's, "full" or "quick", which rows of errors alone cannot say); returns what
    was written."""
    from grader.core.pieces import PIECES
    from grader.regrade import classreport, similarity

    try:
        pairs, note = similarity.report(files.code, files.similarity), ""
    except ImportError as e:
        pairs, note = None, str(e)
    except Exception as e:  # noqa: BLE001 - the gradebook stands; the reports are its companions
        pairs, note = None, f"it failed: {type(e).__name__}: {str(e)[:200]}"
    try:
        classreport.write(files.classreport, rows=rows, reports=files.reports,
                          pieces=list(PIECES) if pieces is None else pieces, pairs=pairs, similarity_note=note,
                          mode=mode)
        said = f"class report: {files.classreport}"
    except Exception as e:  # noqa: BLE001 - as above
        said = f"no class report (it failed: {type(e).__name__}: {str(e)[:200]})"
    said += f"; similarity: {files.similarity}" if pairs is not None else f"; no similarity report ({note})"
    if progress:
        print(said, file=sys.stderr)
    return said


class MergeError(Exception):
    """The parts do not make one gradebook; str() is one line a problem."""


def find(parts: list[Path]) -> list[Path]:
    """The manifests the parts name: a shard's CSV (its manifest beside it), a folder holding one (an
    artifact's folder), or a folder of such folders."""
    found: list[Path] = []
    for part in parts:
        if part.is_file():
            found.append(Files.of(part).manifest)
            continue
        here = sorted(part.glob("*-manifest.json"))
        found += here or sorted(part.glob("*/*-manifest.json"))
        if not here and not any(part.glob("*/*-manifest.json")):
            raise MergeError(f"{part} holds no shard's manifest (*-manifest.json): give the folders or CSVs that "
                             "`grade batch --shard K/N` wrote")
    return found


def load(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read(MAX_MANIFEST))
        data["class"]["digest"], data["students"]  # noqa: B018 - the keys every manifest has
    except FileNotFoundError:
        raise MergeError(f"{path} is missing: the shard's CSV was given without the manifest its run writes beside "
                         "it") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise MergeError(f"{path} is not a shard's manifest ({type(e).__name__}): rerun that shard") from None
    return data
