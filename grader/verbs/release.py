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
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from grader import REFERENCE, ROOT, lab
from grader.runner import layout

# The PyTorch every grading route installs (the CPU build, from TORCH_INDEX): the Classroom workflow, Gradescope's
# setup.sh, the regrade engines. Every install line a README or template shows names this version
# (tests/release/test_torch_pin.py), so a student installs what they are graded with.
TORCH = "torch==2.13.0"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"

# never copied into a student release (the sealed lab modules travel inside grader/sealed.bin)
_PRIVATE = ("reference/", "tests/", ".ci/", "bench/", "docs/", ".github/workflows/ci.yml", "grader/cases/test_",
            "grader/cases/util.py", "README.md", *(f"grader/lab/{name}.py" for name in lab.SEALED),
            "grader/templates/regrade/")  # the class regrade's engines (grade release regrade): instructors only


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line and (ROOT / line).is_file()]


def sealed_bundle() -> dict[str, bytes]:
    files = {f"reference/{p.name}": p.read_bytes() for p in sorted(REFERENCE.glob("*.py"))}
    for p in sorted((ROOT / "grader" / "cases").glob("*.py")):
        files[f"attnlab_cases/{p.name}"] = p.read_bytes()
    for name in lab.SEALED:  # opened, they import as grader.lab.<name> (grader.lab.attach)
        files[f"{lab.SEALED_DIR}/{name}.py"] = (ROOT / "grader" / "lab" / f"{name}.py").read_bytes()
    return files


def student(out: Path, key: bytes | None = None, notes: list[str] | None = None) -> tuple[Path, bytes]:
    """Build the student repository in `out`; returns (out, the sealing key).

    The files the lab generates (exercises/ from reference/, the case manifests, the toy task's splits:
    grader.verbs.generated) are made afresh, never copied from the working tree; where the working tree's differ,
    `notes` (when given) receives one line saying those edits are not in the release. Everything is made before
    anything is written: a generator that fails leaves `out` untouched.
    """
    from cryptography.fernet import Fernet

    from grader.verbs import generated

    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    key = key or Fernet.generate_key()
    try:
        made = generated.generated()
    except generated.GenerateError as e:
        raise ReleaseError(str(e)) from None
    tracked = tracked_files()
    for rel in tracked:
        if rel.startswith(_PRIVATE) or rel.startswith(generated.EXERCISES) or rel in made:
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, dest)
    for rel, data in made.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    said = generated.unshipped(made, ROOT, tracked)
    if said and notes is not None:
        notes.append(said)
    (out / "grader" / "sealed.bin").write_bytes(layout.seal(sealed_bundle(), key))
    # the students' README, not the instructor's (README.md is in _PRIVATE)
    readme = (resources.files("grader") / "templates" / "student" / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(readme)
    return out, key


class ReleaseError(Exception):
    """A release cannot be built here; str() is one line: what is missing and what to do."""


# --- the sealing key: reused from release to release, readable by its owner only -------------------

KEY_SUFFIX = ".seal-key"


def key_path(out: Path) -> Path:
    """Where a release's key is kept by default: beside it, OUT.seal-key (never inside it)."""
    return out.with_name(out.name + KEY_SUFFIX)


@dataclass(frozen=True)
class ReleaseKey:
    key: bytes
    path: Path  # the file that holds it once the release is built
    origin: str  # "file" (--seal-key-file), "env" (ATTNLAB_SEAL_KEY), "previous" (path, left by an earlier release), "new"
    replaces: bool = False  # a new key over the previous release's key file (--new-key)


def _valid(data: bytes, where: str) -> bytes:
    from cryptography.fernet import Fernet

    key = data.strip()
    try:
        Fernet(key)
    except (ValueError, TypeError):
        raise ReleaseError(f"{where} does not hold a seal key (44 characters of URL-safe base64, as "
                           "`grade release student` writes them)") from None
    return key


def _read_key(path: Path) -> bytes:
    try:
        return _valid(path.read_bytes(), str(path))
    except OSError as e:
        raise ReleaseError(f"cannot read the seal key {path}: {e.strerror}") from None


def release_key(out: Path, *, key_file: Path | None = None, env_key: bytes | None = None,
                new: bool = False) -> ReleaseKey:
    """The key that seals the release in `out`, and where it comes from; nothing is written here.

    `new` (--new-key): a new key, kept in OUT.seal-key. Otherwise the first of: the `key_file` given
    (--seal-key-file), `env_key` (ATTNLAB_SEAL_KEY), the previous release's OUT.seal-key, and only then a
    new key. A key reused keeps the Actions secret opening the new release's grader/sealed.bin.
    """
    from cryptography.fernet import Fernet

    beside = key_path(out)
    if beside.exists() and not beside.is_file():
        raise ReleaseError(f"{beside} is not a file; the release's key is kept there")
    if new:
        if key_file is not None:
            raise ReleaseError("--new-key makes a new key: leave out --seal-key-file, or drop --new-key to reuse "
                               "the key in that file")
        return ReleaseKey(Fernet.generate_key(), beside, "new", replaces=beside.is_file())
    if key_file is not None:
        return ReleaseKey(_read_key(key_file), key_file, "file")
    if env_key:
        key = _valid(env_key, "ATTNLAB_SEAL_KEY")
        if beside.is_file() and _read_key(beside) != key:
            raise ReleaseError(f"ATTNLAB_SEAL_KEY is not the key in {beside}, which sealed the previous release; "
                               f"unset it to reuse that key, or pass --new-key to make a new one")
        return ReleaseKey(key, beside, "env")
    if beside.is_file():
        return ReleaseKey(_read_key(beside), beside, "previous")
    return ReleaseKey(Fernet.generate_key(), beside, "new")


def private_folders(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents, each new one 0700 (whatever the umask); returns those made."""
    todo, at = [], Path(os.path.abspath(folder))
    while not at.exists():
        todo.append(at)
        at = at.parent
    for made in reversed(todo):
        made.mkdir(mode=0o700, exist_ok=True)
        os.chmod(made, 0o700)
    return list(reversed(todo))


def write_key(path: Path, key: bytes) -> None:
    """Write `key` to `path` for its owner only (0600), in one step: a file made 0600 and renamed over the old."""
    private_folders(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # made 0600, never through a link
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(key + b"\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
