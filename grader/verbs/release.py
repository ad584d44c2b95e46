"""`grade release`: the repository students get, and later the solutions.

Student release: stubs, notebook, grader, data and the per-push grading workflow; the reference, the
hidden cases and the lab modules that hold a piece's answer (grader.lab.SEALED: the baseline, the
evaluator, Luong's model) travel only as grader/sealed.bin, encrypted with a key the instructor stores
as the Actions secret ATTNLAB_SEAL_KEY. Where the key is set (the per-push workflow) `grade` opens the
bundle and runs the real cases; without it (a student's laptop) `grade` runs the public smoke checks
and says that the graded run happens where the key is.

The key is reused from one release to the next (`release_key`), so the Actions secret keeps opening
the bundle; it is written for its owner only.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from grader import REFERENCE
# the build and the key, shared with the other verbs that ship a release (student: the name callers know)
from grader.release.build import (
    ReleaseError,
    ReleaseKey,
    private_folders,
    release_key,
    student,
    write_key,
)


def _others_may_read(path: Path) -> bool:
    return bool(os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def build_student(out: Path, *, key_file: Path | None = None, env_key: bytes | None = None,
                  new_key: bool = False) -> tuple[ReleaseKey, str]:
    """`grade release student`: the release in `out`, sealed with `release_key`'s key, which is then kept for
    its owner only; returns the key and what to tell the instructor: one line saying where the key came from and
    what was written, and one more where the working tree's generated files differ from what the release ships."""
    chosen = release_key(out, key_file=key_file, env_key=env_key, new=new_key)
    writes = chosen.origin == "new" or chosen.origin == "env" and not chosen.path.is_file()
    if writes:
        private_folders(chosen.path.parent)  # before the release makes them with the usual mode
    notes: list[str] = []
    student(out, chosen.key, notes)
    where = chosen.path
    if writes:
        write_key(where, chosen.key)
    if chosen.origin == "new":
        said = (f"sealing key: a new one, written to {where} (mode 0600)"
                + ("; it replaces the previous release's key there, so update the Actions secret ATTNLAB_SEAL_KEY "
                   "(the old one does not open this release)" if chosen.replaces else "")
                + ("; ATTNLAB_SEAL_KEY, set here, was not used (--new-key)" if env_key else ""))
    elif chosen.origin == "previous":
        said = f"sealing key: reused from {where}, the previous release's key file (--new-key makes a new one)"
        if _others_may_read(where):  # written by an older `grade release student`, readable by anyone
            os.chmod(where, 0o600)
            said += "; its mode is now 0600"
    elif chosen.origin == "env":
        said = ("sealing key: reused from ATTNLAB_SEAL_KEY, "
                + (f"written to {where} (mode 0600) for the next release" if writes else f"the same as in {where}"))
    else:
        said = f"sealing key: reused from {where} (--seal-key-file); nothing written"
        if _others_may_read(where):
            said += f"; warning: others may read that file (chmod 600 {where})"
    return chosen, "\n".join([said, *notes])


def _notebook_extras(execute: bool) -> None:
    """Refuse before anything is written when the notebook extras the solutions need are not installed."""
    import importlib.util

    needed = ["nbformat"] + (["nbclient", "ipykernel"] if execute else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise ReleaseError(f"the solution notebook needs {', '.join(missing)}: pip install -e '.[notebook]'"
                           + ("" if "nbformat" in missing else " (or pass --no-execute to skip running it)"))


class Progress:
    """One line per executed code cell (nbclient's on_cell_execute and on_cell_executed hooks): running the
    solutions takes minutes, and a silent terminal looks hung."""

    def __init__(self, nb, say: Callable[[str], None]) -> None:
        code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.source.strip()]
        self.number = {index: n for n, index in enumerate(code, 1)}  # a cell's place among those that run
        self.total, self.say, self.started = len(code), say, time.monotonic()

    def start(self, cell, cell_index: int, **_) -> None:
        self.started = time.monotonic()

    def done(self, cell, cell_index: int, execute_reply=None, **_) -> None:
        seconds = time.monotonic() - self.started
        n = self.number.get(cell_index, cell_index + 1)
        name = f" ({cell.get('id')})" if cell.get("id") else ""
        failed = " and failed" if (execute_reply or {}).get("content", {}).get("status") == "error" else ""
        self.say(f"ran cell {n} of {self.total}{name} in {seconds:.1f} s{failed}")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# what the solutions' cells print of the machine that ran them: its training times (grader/templates/lesson/)
MACHINE_TIMES = ((re.compile(r"(\d+ steps) in \d+ s;"), r"\1;"),
                 (re.compile(r"\d+ ms per training step"), "… ms per training step"))


def strip_machine(nb) -> None:
    """Take out of the executed notebook what belongs to the machine that ran the solutions, the instructor's, not
    a student's: the check cell's jail note, the training cells' times, the Python version, each cell's timing."""
    from grader.runner.summary import JAIL_NOTE

    def clean(text: str) -> str:
        text = JAIL_NOTE.sub("", text)
        for pattern, words in MACHINE_TIMES:
            text = pattern.sub(words, text)
        return text

    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = clean(output.get("text", ""))
            elif isinstance(output.get("data", {}).get("text/plain"), str):
                output["data"]["text/plain"] = clean(output["data"]["text/plain"])


def client(make, nb, cwd: str, progress: Progress):
    """The NotebookClient (`make`) that runs the solutions in `cwd`, telling `progress` of each cell."""
    # coalesced, a report printed in pieces is one stream output, so strip_machine sees its note whole
    return make(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": cwd}}, coalesce_streams=True,
                on_cell_execute=progress.start, on_cell_executed=progress.done)


def solutions(out: Path, execute: bool = True, say: Callable[[str], None] = _say) -> Path:
    """The reference code and the solution notebook (executed, with its plots) in `out`.

    The notebook is built and run before anything is written: a missing extra or a failing cell leaves no
    half-built folder behind.
    """
    import tempfile

    _notebook_extras(execute)
    from grader.lesson import notebook

    nb = notebook.build("reference")
    if execute:
        from nbclient import NotebookClient

        progress = Progress(nb, say)
        with tempfile.TemporaryDirectory(prefix="attnlab-solutions-") as cwd:
            try:
                client(NotebookClient, nb, cwd, progress).execute()
            except Exception as e:  # noqa: BLE001 - a failing cell, a missing kernel, a timeout: one line each
                last = (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
                raise ReleaseError(f"the solution notebook did not run ({last}); nothing was written. "
                                   "Try `grade release solutions --no-execute OUT`") from None
        strip_machine(nb)
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    for p in sorted(REFERENCE.glob("*.py")):
        shutil.copyfile(p, out / p.name)
    nbformat.write(nb, out / "lesson-solutions.ipynb")
    return out
