"""The regrade's gradebook: the CSV itself and the files beside it (the manifest's writing and reading is
grader/regrade/manifests.py, the journal grader/regrade/journal.py, the digests they record grader/regrade/digests.py).

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
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from grader.regrade.journal import Journal

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


# --- a whole class's companions ------------------------------------------------------------------

def class_reports(files: Files, rows: list[dict], progress: bool = True, pieces: list[str] | None = None,
                  mode: str | None = None, known: list[Path] = ()) -> str:
    """The similarity report and the class report beside a whole class's gradebook (its pieces: every piece unless
    `pieces` names them; `mode`: the run's, "full" or "quick", which rows of errors alone cannot say; `known`: the
    earlier terms' class folders, or folders of the lab's modules, that are known sources beside the reference);
    returns what was written."""
    from grader.core.pieces import PIECES
    from grader.regrade import classreport, similarity, similarity_input

    found: list[str] = []
    try:
        sources, said = similarity_input.known(list(known))
        findings = similarity.report(files.code, files.similarity, known=sources, known_notes=said)
        pairs, note, found = findings.pairs, "", findings.summary()
    except ImportError as e:
        pairs, note = None, str(e)
    except Exception as e:  # noqa: BLE001 - the gradebook stands; the reports are its companions
        pairs, note = None, f"it failed: {type(e).__name__}: {str(e)[:200]}"
    try:
        classreport.write(files.classreport, rows=rows, reports=files.reports,
                          pieces=list(PIECES) if pieces is None else pieces, pairs=pairs, similarity_note=note,
                          mode=mode, similarity_found=found)
        said = f"class report: {files.classreport}"
    except Exception as e:  # noqa: BLE001 - as above
        said = f"no class report (it failed: {type(e).__name__}: {str(e)[:200]})"
    said += f"; similarity: {files.similarity}" if pairs is not None else f"; no similarity report ({note})"
    if progress:
        print(said, file=sys.stderr)
    return said
