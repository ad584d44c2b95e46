"""`grade batch`: regrade a whole class in parallel into a CSV gradebook and one JSON report each."""
from __future__ import annotations

import csv
import json
import os
import tempfile
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from . import report
from .check import MAX_FILE, grade, stage
from .pieces import MODULES, PIECES
from .sandbox import Limits, Zygote


class BadSubmission(Exception):
    """One student's submission could not be read; the batch records it and goes on."""


def student_name(path: Path) -> str:
    return path.stem if path.is_file() else path.name


def error_row(name: str, message: str) -> dict:
    """A gradebook row for a submission that could not be graded: zero everywhere, and why."""
    return {"student": name, **{p: 0 for p in PIECES}, "total": 0, "max_score": None, "status": f"error: {message}"}


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, into: Path) -> None:
    """One member, never more than MAX_FILE bytes of it (a zip bomb stops there, whatever its header says)."""
    if info.is_dir() or info.file_size > MAX_FILE:
        return
    with zf.open(info) as src:
        data = src.read(MAX_FILE + 1)
    if len(data) <= MAX_FILE:
        dest = into / info.filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def unpack(path: Path, into: Path) -> Path:
    """A folder laid out like exercises/ for a folder, a .zip or a notebook submission."""
    if path.is_dir():
        found = path
        if (path / "lesson.ipynb").is_file():  # the same rule as `grade`: an untouched stub's cell counts instead
            from .notebook import NotebookError, combine

            try:
                found, _ = combine(path, into / "combined")
            except NotebookError as e:
                raise BadSubmission(str(e)) from None
    elif path.suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.filename.endswith(".py") and ".." not in info.filename and not info.filename.startswith("/"):
                        _extract(zf, info, into / "zip")
        except zipfile.BadZipFile as e:
            raise BadSubmission(f"not a readable zip ({e})") from None
        hits = sorted((into / "zip").rglob("encoder.py")) + sorted((into / "zip").rglob("*.py"))
        if not hits:
            raise BadSubmission("the zip holds none of the lab's files")
        found = hits[0].parent
    elif path.suffix == ".ipynb":
        from .notebook import NotebookError, extract

        try:
            found = extract(path, into / "nb")
        except NotebookError as e:
            raise BadSubmission(str(e)) from None
    else:
        raise BadSubmission("expected a folder, a .zip or a .ipynb")
    if not any((found / f"{m}.py").is_file() for m in MODULES):
        raise BadSubmission("holds none of the lab's files")
    return stage(found, into)


def main(
    *, submissions: list[Path], out: Path, reports: Path | None, jobs: int, seed: str, limits: Limits,
    progress: bool = True,
) -> tuple[int, int]:
    """Grade every submission; returns (graded, unreadable). One broken submission never stops the batch."""
    reports = reports or out.with_name(out.stem + "-reports")
    reports.mkdir(parents=True, exist_ok=True)
    local = threading.local()
    zygotes: list[Zygote] = []
    lock = threading.Lock()

    def one(path: Path) -> dict:
        if not hasattr(local, "zygote"):
            local.zygote = Zygote()
            with lock:
                zygotes.append(local.zygote)
        name = student_name(path)
        with tempfile.TemporaryDirectory(prefix="attnlab-batch-") as tmp:
            try:
                sub = unpack(path, Path(tmp))
            except BadSubmission as e:
                (reports / f"{name}.json").write_text(json.dumps({"student": name, "error": str(e)}, indent=2) + "\n")
                return error_row(name, str(e))
            runs = grade(submission=sub, pieces=list(PIECES), seed=seed, limits=limits, zygote=local.zygote)
        data = report.as_dict(runs, student=name, seed=seed, quick=limits.quick)
        (reports / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
        return {"student": name, **{p["name"]: p["score"] for p in data["pieces"]}, "total": data["score"],
                "max_score": data["max_score"], "status": "ok"}

    rows: list[dict] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(submissions), desc="grading", unit="submission")
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(one, p): p for p in submissions}
            for fut in as_completed(futures):
                try:
                    rows.append(fut.result())
                except Exception as e:  # noqa: BLE001 - a grader fault on one student is still just one row
                    rows.append(error_row(student_name(futures[fut]), f"{type(e).__name__}: {e}"))
                if bar:
                    bar.update(1)
    finally:
        if bar:
            bar.close()
        for z in zygotes:
            z.close()
    rows.sort(key=lambda r: r["student"])
    max_score = next((r["max_score"] for r in rows if r["max_score"] is not None), 0)
    with open(out, "w", newline="") as f:
        # "quick" marks a gradebook without the training cases: its totals are not the grade
        writer = csv.DictWriter(f, fieldnames=["student", *PIECES, "total", "max_score", "status", "mode"])
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "max_score": r["max_score"] if r["max_score"] is not None else max_score,
                             "mode": "quick" if limits.quick else "full"})
    bad = sum(1 for r in rows if r["status"] != "ok")
    return len(rows) - bad, bad


def default_jobs() -> int:
    return os.cpu_count() or 1
