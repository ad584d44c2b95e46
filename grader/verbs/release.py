"""`grade release`: the repository students get, and later the solutions.

Student release: stubs, notebook, grader, data and the Classroom workflow; the reference and the
hidden cases travel only as grader/sealed.bin, encrypted with a key the instructor stores as the
Classroom secret ATTNLAB_SEAL_KEY. Where the key is set (the Classroom workflow) `grade` opens the
bundle and runs the real cases; without it (a student's laptop) `grade` runs the public smoke checks
and says that the graded run happens in Classroom.
"""
from __future__ import annotations

import shutil
import subprocess
from importlib import resources
from pathlib import Path

from grader import REFERENCE, ROOT
from grader.runner import layout

# never copied into a student release
_PRIVATE = ("reference/", "tests/", ".ci/", "bench/", "docs/", ".github/workflows/ci.yml", "grader/cases/test_",
            "grader/cases/util.py", "README.md")


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line and (ROOT / line).is_file()]


def sealed_bundle() -> dict[str, bytes]:
    files = {f"reference/{p.name}": p.read_bytes() for p in sorted(REFERENCE.glob("*.py"))}
    for p in sorted((ROOT / "grader" / "cases").glob("*.py")):
        files[f"attnlab_cases/{p.name}"] = p.read_bytes()
    return files


def student(out: Path, key: bytes | None = None) -> tuple[Path, bytes]:
    """Build the student repository in `out`; returns (out, the sealing key)."""
    from cryptography.fernet import Fernet

    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    key = key or Fernet.generate_key()
    for rel in tracked_files():
        if rel.startswith(_PRIVATE):
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, dest)
    (out / "grader" / "sealed.bin").write_bytes(layout.seal(sealed_bundle(), key))
    # the students' README, not the instructor's (README.md is in _PRIVATE)
    readme = (resources.files("grader") / "templates" / "student" / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(readme)
    return out, key


class ReleaseError(Exception):
    """A release cannot be built here; str() is one line: what is missing and what to do."""


def _notebook_extras(execute: bool) -> None:
    """Refuse before anything is written when the notebook extras the solutions need are not installed."""
    import importlib.util

    needed = ["nbformat"] + (["nbclient", "ipykernel"] if execute else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise ReleaseError(f"the solution notebook needs {', '.join(missing)}: pip install -e '.[notebook]'"
                           + ("" if "nbformat" in missing else " (or pass --no-execute to skip running it)"))


def solutions(out: Path, execute: bool = True) -> Path:
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

        with tempfile.TemporaryDirectory(prefix="attnlab-solutions-") as cwd:
            try:
                NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": cwd}}).execute()
            except Exception as e:  # noqa: BLE001 - a failing cell, a missing kernel, a timeout: one line each
                last = (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
                raise ReleaseError(f"the solution notebook did not run ({last}); nothing was written. "
                                   "Try `grade release solutions --no-execute OUT`") from None
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    for p in sorted(REFERENCE.glob("*.py")):
        shutil.copyfile(p, out / p.name)
    nbformat.write(nb, out / "lesson-solutions.ipynb")
    return out
