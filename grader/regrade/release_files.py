"""Which of a student repository's release files differ from the instructor's release: `grade batch --release`.

The regrade grades only the pieces, so nothing a student changed elsewhere (the workflow, the grader, the data)
moves their score there; but a Classroom score came from the repository's own workflow and grader, so the
gradebook names every repository whose release files were changed, removed or, under the protected paths
(`.github/`, `grader/` and the release's other folders but exercises/), added to, bytecode included: a clone holds
a `__pycache__` only where the student committed it, and a `.pyc` there runs in place of its source. The release files are those the instructor's release folder holds as git would
track them (`release_held`): what installing or running the release there makes (`pip install -e .`'s
*.egg-info/, __pycache__/, build/) is no release file, so it flags no student. The repository is untrusted: nothing
is followed through a link, and no file is read past the size of its release counterpart.

Each repository's verdict is a Verdict: its kind, the gradebook cell that says it, and the files it names;
Verdict.read takes a cell read back (from the CSV or a manifest) to its verdict again, for the class report.
"""
from __future__ import annotations

import enum
import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.core.files import Refused, is_link, read_regular

STUDENTS = ("exercises/",)  # what the student is asked to change
PROTECTED = (".github/", "grader/")  # Classroom's protected paths: an added file there is flagged too
# and, at the root, an added file that Python, pip or pytest would load (setup.py, sitecustomize.py, a .pth,
# pytest.ini), a .gitattributes (it changes how grader/ is checked out) or an added folder (a pip/ or json/
# package shadows the real one for any `python -m` run there), but for those an honest student makes
# (grade --plots plots/, a venv, editors' and Jupyter's own)
LOADED_AT_ROOT = (".py", ".pth", ".toml", ".cfg", ".ini")
HONEST_FOLDERS = {"plots", ".venv", "venv", ".vscode", ".idea", ".ipynb_checkpoints", "__pycache__", ".pytest_cache"}
SKIP_PARTS = {".git", "__pycache__", ".ipynb_checkpoints"}
MAX_ENTRIES = 20_000  # a walk of an untrusted tree stops here


def _walk(root: Path, under: str = "", skip: frozenset[str] | set[str] = SKIP_PARTS) -> list[str]:
    """Relative paths of the entries under `root`/`under` that are not folders, without following links, nor
    entering a folder named in `skip`."""
    found: list[str] = []
    todo = [root / under] if under else [root]
    while todo and len(found) < MAX_ENTRIES:
        folder = todo.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name in skip:
                continue
            if e.is_dir(follow_symlinks=False):
                todo.append(Path(e.path))
            else:
                found.append(Path(e.path).relative_to(root).as_posix())
    return found


def _digest(path: Path, cap: int) -> str | None:
    """SHA-256 of a regular file no larger than `cap` bytes, read without following a link; None otherwise."""
    try:
        data = read_regular(path, cap, path.name)
    except Refused:  # a link, not a regular file, or unreadable
        return None
    return None if data is None else hashlib.sha256(data).hexdigest()


# what installing, running or building a release makes in its folder (its .gitignore names them); only where git
# cannot say which files the release holds are they left out by name
BYPRODUCTS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", "build", "dist", ".venv", "venv"}
GIT_SECONDS = 60


def release_held(release: Path) -> list[str]:
    """The files the release folder holds, as git would track them in the repository pushed from it: every file its
    own .gitignore files do not ignore (an instructor's global excludes, which may name *.bin, are not read), whether
    or not the folder is a git repository; where git cannot run, every file outside the build and install
    byproducts (BYPRODUCTS, *.egg-info)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # no GIT_DIR or GIT_INDEX_FILE of a caller's
    with tempfile.TemporaryDirectory(prefix="attnlab-release-files-") as tmp:
        git = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", f"--git-dir={tmp}"]
        try:  # an empty repository of our own, the release its work tree: all its files are "others"
            subprocess.run([*git, "init", "-q", "--bare"], env=env, capture_output=True, check=True,
                           timeout=GIT_SECONDS)
            listed = subprocess.run([*git, f"--work-tree={release}", "ls-files", "-z", "--others",
                                     "--exclude-per-directory=.gitignore"],  # the release's own, not the instructor's
                                    env=env, capture_output=True, check=True, timeout=GIT_SECONDS).stdout
        except (OSError, subprocess.SubprocessError):
            return sorted(rel for rel in _walk(release) if not _byproduct(rel))
    return sorted(os.fsdecode(name) for name in listed.split(b"\0") if name and not name.endswith(b"/"))  # a/: a repo


def _byproduct(rel: str) -> bool:
    return any(part in BYPRODUCTS or part.endswith(".egg-info") for part in rel.split("/")[:-1])


def release_digests(release: Path) -> dict[str, tuple[int, str]]:
    """Every release file (`release_held`) outside what students change: its (size, SHA-256)."""
    out = {}
    for rel in release_held(release):
        if rel.startswith(STUDENTS):
            continue
        path = release / rel
        size = path.stat().st_size
        out[rel] = (size, _digest(path, size) or "")
    return out


def changed(repo: Path, release: dict[str, tuple[int, str]]) -> list[str]:
    """The release files `repo` changed or lacks, then what it added under the protected paths or, of the kinds
    Python, pip and pytest load, at its root ("+path", "+folder/")."""
    out = [rel for rel, (size, digest) in release.items() if _digest(repo / rel, size) != digest]
    try:
        top_level = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in os.scandir(repo))
    except OSError:
        top_level = []
    released = {rel.split("/")[0] for rel in release} | {s.rstrip("/") for s in STUDENTS}
    out += [f"+{name}" + ("/" if folder else "") for name, folder in top_level
            if name not in released and name not in SKIP_PARTS
            and (name not in HONEST_FOLDERS if folder else name.endswith(LOADED_AT_ROOT) or name == ".gitattributes")]
    # every file added under a release folder is named, bytecode included: a clone holds a __pycache__ only where
    # the student committed one, and a .pyc there can run in place of its source (issue 50)
    tops = sorted(set(PROTECTED) | {rel.split("/")[0] + "/" for rel in release if "/" in rel})
    for top in tops:
        if (repo / top).is_dir() and not is_link(repo / top):
            out += [f"+{rel}" for rel in _walk(repo, top, skip={".git"}) if rel not in release]
        elif any(rel.startswith(top) for rel in release) and is_link(repo / top.rstrip("/")):
            out.append(top.rstrip("/"))
    return sorted(dict.fromkeys(out))


class Kind(enum.Enum):
    """What the check found of one submission."""

    NO_RELEASE = "no release"  # the batch ran without --release: nothing was checked
    NOT_CHECKED = "not checked"  # the repository could not be read
    NOT_A_REPOSITORY = "n/a"  # a .zip or notebook hand-in, or a roster student without a repository
    UNCHANGED = "unchanged"
    CHANGED = "changed"  # a release file changed, removed or added: the Classroom score is not to be trusted
    BLANK = "blank"  # a row read back without the cell: nothing said


SHOWN = 10  # changed files a cell names
_NO_RELEASE = "not checked (no --release)"
_CHANGED = "CHANGED:"


@dataclass(frozen=True)
class Verdict:
    """One submission's verdict: its kind, the gradebook's cell for it and, changed, every file it names (the cell
    names the first SHOWN)."""

    kind: Kind
    cell: str
    files: tuple[str, ...] = ()

    @classmethod
    def no_release(cls) -> Verdict:
        return cls(Kind.NO_RELEASE, _NO_RELEASE)

    @classmethod
    def not_checked(cls, why: str) -> Verdict:
        return cls(Kind.NOT_CHECKED, f"not checked ({why})")

    @classmethod
    def not_a_repository(cls, why: str = "not a repository") -> Verdict:
        return cls(Kind.NOT_A_REPOSITORY, f"n/a ({why})")

    @classmethod
    def unchanged(cls) -> Verdict:
        return cls(Kind.UNCHANGED, "unchanged")

    @classmethod
    def changes(cls, files: list[str]) -> Verdict:
        shown = "; ".join(files[:SHOWN]) + (f"; and {len(files) - SHOWN} more" if len(files) > SHOWN else "")
        return cls(Kind.CHANGED, f"{_CHANGED} {shown}", tuple(files))

    @classmethod
    def read(cls, cell: object) -> Verdict:
        """The verdict of a cell read back (its files: only those the cell names). A cell that is none of the
        benign ones is taken as CHANGED: whatever it says is shown, never hidden."""
        text = "" if cell is None else str(cell).strip()
        if not text:
            return cls(Kind.BLANK, "")
        if text == "unchanged":
            return cls(Kind.UNCHANGED, text)
        if text == _NO_RELEASE:
            return cls(Kind.NO_RELEASE, text)
        if text.startswith("not checked"):
            return cls(Kind.NOT_CHECKED, text)
        if text.startswith("n/a"):
            return cls(Kind.NOT_A_REPOSITORY, text)
        return cls(Kind.CHANGED, text)

    @property
    def what(self) -> str:
        """The cell without its `CHANGED:` (what changed), else the cell."""
        return self.cell[len(_CHANGED):].lstrip() if self.cell.startswith(_CHANGED) else self.cell


def verdict(path: Path, release: dict[str, tuple[int, str]] | None) -> Verdict:
    """The verdict on the submission at `path` (`release`: release_digests, or None without --release)."""
    if release is None:
        return Verdict.no_release()
    if is_link(path) or not path.is_dir() or not (path / "exercises").is_dir():
        return Verdict.not_a_repository()
    files = changed(path, release)
    return Verdict.changes(files) if files else Verdict.unchanged()

