"""Reading a class's submissions for `grade batch`, as untrusted input: the regrade runs unjailed, with the
instructor's reference beside it, so nothing a student hands in may steer what it reads or exhaust it.

- Links are refused at every level (the submission itself, `exercises/`, the notebook, a zip's members):
  `snapshot` copies only regular files, never through a link, into a private folder; a piece file that
  is a link or not a regular file stays something `stage` refuses, with the same reason as in `grade`.
- Sizes are capped before anything is read: a notebook, a zip, its member count and the bytes unpacked.
- Notebooks and zips are parsed in a child interpreter with an address-space and CPU-time cap (where
  `resource` exists) and a wall-clock timeout (everywhere), which hands back only the lab's files.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from grader.host import python, resource
from grader.pieces import MODULES

NOTEBOOK = "lesson.ipynb"
LAB_FILES = frozenset([*(f"{m}.py" for m in MODULES), NOTEBOOK])
MAX_NOTEBOOK = 16 << 20  # bytes: the lesson with every plot's output is about 1 MB
MAX_ZIP = 64 << 20  # bytes on disk
MAX_ZIP_MEMBERS = 10_000  # entries in a zip's directory: a whole repository with .git fits
MAX_ZIP_LAB_MEMBERS = 64  # members named like a lab file, in all the zip's folders together
MAX_UNPACKED = 24 << 20  # bytes unpacked from one zip: one folder's lab files
MEMORY = 512 << 20  # the parsing child's address space: it starts at about 40 MB; a 16 MB notebook needs ~200
SECONDS = 30  # the parsing child's wall-clock (and CPU) time
_REPARSE_POINT = 0x400  # Windows: a junction or symlink
# an untrusted file is opened never through a link, and without blocking on a FIFO
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


class Refused(Exception):
    """A submission the regrade will not read; str() is the one-line reason for the student's row."""


def is_link(path: Path) -> bool:
    """A symbolic link, or on Windows a junction (any reparse point): never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0) & _REPARSE_POINT)


def no_link(path: Path, what: str) -> None:
    if is_link(path):
        raise Refused(f"{what} is a symbolic link; the regrade reads only real files and folders: "
                      "hand in the files themselves")


def read_regular(path: Path, cap: int, what: str) -> bytes | None:
    """A regular file's bytes, opened without following a link; None if it is over `cap` bytes."""
    no_link(path, what)
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as e:
        raise Refused(f"{what} cannot be read ({e.strerror}); hand in a regular file") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise Refused(f"{what} is not a regular file; hand in the file itself")
        data = f.read(cap + 1)
    return data if len(data) <= cap else None


def snapshot(folder: Path, into: Path, notes: list[str] | None = None) -> Path:
    """Copy the lab's files of a folder laid out like exercises/ into `into` (created), never through a link.

    A piece file that is a link becomes a dangling link and anything else that is not a regular file a
    folder, so `stage` refuses that piece with its usual reason; a notebook that is a link refuses it all,
    one over the size cap is left out (as `grade` leaves out one it cannot read) and `notes` says so.
    """
    from grader.runner.stage import MAX_FILE

    into.mkdir(parents=True)
    for name in sorted(LAB_FILES):
        src = folder / name
        try:
            info = os.lstat(src)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise Refused(f"{name} cannot be read ({e.strerror})") from None
        if name == NOTEBOOK:
            data = read_regular(src, MAX_NOTEBOOK, name)
            if data is None:
                if notes is not None:
                    notes.append(f"{name} is over {MAX_NOTEBOOK >> 20} MB; graded: the .py files only")
                continue
            (into / name).write_bytes(data)
        elif is_link(src):
            os.symlink("link-refused", into / name)  # points nowhere: stage says "a symbolic link"
        elif stat.S_ISREG(info.st_mode):
            data = read_regular(src, MAX_FILE, name)
            (into / name).write_bytes(data if data is not None else b"#" * (MAX_FILE + 1))  # stage: "over"
        else:
            (into / name).mkdir()  # a FIFO, a device, a folder: stage says "not a regular file"
    return into


def parse(kind: str, src: Path, into: Path) -> Path:
    """The folder laid out like exercises/ that a notebook (`kind` "notebook"), a zip ("zip") or a snapshot
    holding lesson.ipynb ("folder", the per-piece rule of notebook.combine) gives, written under `into` by a
    child with a memory and time cap; src has already passed its size cap."""
    into.mkdir(parents=True, exist_ok=True)
    memory = MEMORY if resource is not None else 0
    argv = python("grader.verbs.intake", kind, str(src), str(into), str(memory))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNLAB_SEAL")}
    what = "the zip" if kind == "zip" else NOTEBOOK if kind == "folder" else src.name
    try:
        done = subprocess.run(argv, capture_output=True, timeout=SECONDS, cwd=into, env=env, stdin=subprocess.DEVNULL,
                              check=False)  # its answer, not its exit status, says what happened
    except subprocess.TimeoutExpired:
        raise Refused(f"reading {what} took over {SECONDS} s; hand in the lab's files only") from None
    try:
        answer = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (IndexError, ValueError, UnicodeDecodeError):
        answer = {"error": f"{what} is too large or too complex to read (over {MEMORY >> 20} MB or {SECONDS} s); "
                           "hand in the lab's files only"}
    if "error" in answer:
        raise Refused(str(answer["error"]).splitlines()[0][:300])
    return Path(answer["folder"])


# --- the child -----------------------------------------------------------------------------------

def _zip_member_is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _unzip(path: Path, into: Path) -> Path:
    """The lab's files of the zip's folder that holds the most of them (ties: the shallowest, then by name),
    written as regular files under `into`; nothing from the archive ever names a path here."""
    from grader.runner.stage import MAX_FILE

    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise Refused(f"not a readable zip ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ZIP_MEMBERS:
            raise Refused(f"the zip has {len(infos)} members (at most {MAX_ZIP_MEMBERS}); zip only the lab's files")
        folders: dict[str, dict[str, zipfile.ZipInfo]] = {}
        lab = 0
        for info in infos:
            name = info.filename.replace("\\", "/")
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if not parts or ".." in parts or name.startswith("/") or ":" in parts[0]:
                continue
            base = parts[-1]
            if _zip_member_is_link(info) and (base in LAB_FILES or base == "exercises"):
                raise Refused(f"the zip's member {'/'.join(parts)[:100]} is a symbolic link; zip the files themselves")
            if base in LAB_FILES and not info.is_dir():
                lab += 1
                if lab > MAX_ZIP_LAB_MEMBERS:
                    raise Refused(f"the zip has over {MAX_ZIP_LAB_MEMBERS} members named like the lab's files; "
                                  "zip one copy of them")
                folders.setdefault("/".join(parts[:-1]), {})[base] = info
        links = {"/".join(p for p in i.filename.replace("\\", "/").split("/") if p) for i in infos
                 if _zip_member_is_link(i)}
        if not folders:
            raise Refused("the zip holds none of the lab's files")
        where = min(folders, key=lambda d: (-len(folders[d]), d.count("/"), d))
        parts = where.split("/") if where else []
        if any("/".join(parts[:i]) in links for i in range(1, len(parts) + 1)):
            raise Refused(f"the zip's folder {where[:100]} is a symbolic link; zip the files themselves")
        out = into / "zip"
        out.mkdir(parents=True)
        total = 0
        for base, info in sorted(folders[where].items()):
            cap = MAX_NOTEBOOK if base == NOTEBOOK else MAX_FILE
            with zf.open(info) as src:
                data = src.read(min(cap, MAX_UNPACKED - total) + 1)
            total += len(data)
            if total > MAX_UNPACKED:
                raise Refused(f"the zip unpacks to over {MAX_UNPACKED >> 20} MB of lab files; zip only the lab's files")
            if base == NOTEBOOK and len(data) > cap:
                raise Refused(f"the zip's {NOTEBOOK} is over {MAX_NOTEBOOK >> 20} MB; clear its outputs")
            (out / base).write_bytes(data)  # a piece over MAX_FILE is refused by stage, with its reason
    return out


def _child(kind: str, src: Path, into: Path) -> dict:
    from grader.lesson.notebook import NotebookError, combine, extract

    label = "the zip" if kind == "zip" else src.name  # src is the regrade's own copy: say what the student named
    try:
        if kind == "notebook":
            return {"folder": str(extract(src, into / "notebook"))}
        if kind == "zip":
            src = _unzip(src, into)
            if not (src / NOTEBOOK).is_file():
                return {"folder": str(src)}
        return {"folder": str(combine(src, into / "combined")[0])}
    except (Refused, NotebookError) as e:
        return {"error": str(e)}
    except MemoryError:
        return {"error": f"{label} is too large to read within {MEMORY >> 20} MB; hand in the lab's files only"}
    except Exception as e:  # noqa: BLE001 - whatever a crafted file raises, the row says so in one line
        return {"error": f"{label} cannot be read ({type(e).__name__}: {str(e)[:150]})"}


def main(argv: list[str]) -> None:
    kind, src, into, memory = argv
    if int(memory) and resource is not None:
        resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
        resource.setrlimit(resource.RLIMIT_CPU, (SECONDS, SECONDS))
    answer = _child(kind, Path(src), Path(into))
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
