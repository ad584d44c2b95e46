"""The student release's build, shared by the verbs that make one (`grade release student`, `classroom50`,
`gradescope`): the repository students get (the sealed bundle, the files the lab generates made afresh) and the
seal key it is sealed with, reused from one release to the next and written for its owner only.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from grader import REFERENCE, ROOT, lab
from grader.core.pieces import PIECES
from grader.runner import sealing

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
    grader.release.generated) are made afresh, never copied from the working tree; where the working tree's differ,
    `notes` (when given) receives one line saying those edits are not in the release. Everything is made before
    anything is written: a generator that fails leaves `out` untouched.
    """
    from cryptography.fernet import Fernet

    from grader.release import generated

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
    (out / "grader" / "sealed.bin").write_bytes(sealing.seal(sealed_bundle(), key))
    # the students' README, not the instructor's (README.md is in _PRIVATE)
    readme = (resources.files("grader") / "templates" / "student" / "README.md").read_text(encoding="utf-8")
    from grader.core import measured

    training = (f"in {measured.seconds('grade_training')} {measured.where('grade_training')}"
                if measured.seconds("grade_training") else "in seconds to minutes")
    readme = readme.replace("{{training}}", training)
    (out / "README.md").write_text(readme.replace("{{pieces}}", ", ".join(f"`{p.module}.py`" for p in PIECES.values())))
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
