"""Reading a class's submissions for `grade batch` (and one for Gradescope), as untrusted input: the regrade runs unjailed, with the
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

from grader.core.files import LAB_FILES, NOTEBOOK, Refused, is_link, no_link, read_regular
from grader.core.host import python, resource
from grader.core.pieces import MODULES
from grader.regrade.classlist import EXERCISES, holds_lab
from grader.runner.stage import stage

MAX_NOTEBOOK = 16 << 20  # bytes: the lesson with every plot's output is about 1 MB
MAX_ZIP = 64 << 20  # bytes on disk
MAX_ZIP_MEMBERS = 10_000  # entries in a zip's directory: a whole repository with .git fits
MAX_ZIP_LAB_MEMBERS = 64  # members named like a lab file, in all the zip's folders together
MAX_UNPACKED = 24 << 20  # bytes unpacked from one zip: one folder's lab files
MEMORY = 512 << 20  # the parsing child's address space: it starts at about 40 MB; a 16 MB notebook needs ~200
SECONDS = 30  # the parsing child's wall-clock (and CPU) time


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
    argv = python("grader.regrade.intake", kind, str(src), str(into), str(memory))
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
    from grader.lesson.ipynb import NotebookError
    from grader.lesson.notebook import combine, extract

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
    if sys.platform != "win32" and int(memory) and resource is not None:  # Windows has no `resource`
        resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
        resource.setrlimit(resource.RLIMIT_CPU, (SECONDS, SECONDS))
    answer = _child(kind, Path(src), Path(into))
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
