"""What the similarity report reads: the class's files, the known sources' and the stubs, and what each student wrote.

A class folder holds a folder per student with the lab's modules in it (the `-code` folder beside a gradebook). A
known source is code a match with explains: the lab's reference (the published solutions are its code), or an
earlier term's class folder, or a folder holding the modules themselves. Everything is read as hostile: without
following links (a link is skipped, as is anything not a plain file), at most MAX_BYTES a file.
"""
from __future__ import annotations

import difflib
import errno
import functools
import io
import os
import re
import stat
import tokenize
from pathlib import Path

from grader import EXERCISES, REFERENCE
from grader.core.files import READ_FLAGS
from grader.core.pieces import MODULES, PIECES

MAX_BYTES = 256 * 1024  # a lab file is a few KB; more is padding meant to slow the report or bloat the page
REFERENCE_LABEL = "the reference"
_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _read(folder: int, name: str) -> tuple[str | None, str | None]:
    """(text, note) of `name` in the open folder; text is None when it is absent or skipped (note says why)."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"skipped ({'a link' if exc.errno == errno.ELOOP else exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "skipped (not a plain file)"
        if info.st_size > MAX_BYTES:
            return None, f"skipped ({info.st_size} bytes, over {MAX_BYTES})"
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:  # it grew after fstat
        return None, f"skipped (over {MAX_BYTES} bytes)"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:  # copydetect would drop the file; its valid parts can still be a copy
        return data.decode("utf-8", errors="replace"), "compared with its invalid UTF-8 replaced"


def _folder(path: str, label: str, notes: list[str]) -> dict[str, str]:
    """{module: text} of the lab's modules in the folder at `path`, opened without following a link."""
    try:  # opened without following a link swapped in since the scan, and read through that descriptor
        folder = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        notes.append(f"{label}: skipped ({exc.strerror})")
        return {}
    found = {}
    try:
        for module in MODULES:
            text, note = _read(folder, f"{module}.py")
            if note:
                notes.append(f"{label}/{module}.py: {note}")
            if text is not None:
                found[module] = text
    finally:
        os.close(folder)
    return found


def collect(code: Path, prefix: str = "") -> tuple[dict[str, dict[str, str]], list[str]]:
    """{student: {module: text}} of every student folder in `code` (named `prefix` + its name), and notes on what
    was skipped."""
    found: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    for entry in sorted(os.scandir(code), key=lambda e: e.name):
        if not _NAME.fullmatch(entry.name) or entry.name.startswith("."):
            notes.append(f"{prefix}{entry.name!r}: skipped (not a student folder name)")
        elif entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
            notes.append(f"{prefix}{entry.name}: skipped (a link or not a folder)")
        else:
            found[prefix + entry.name] = _folder(entry.path, prefix + entry.name, notes)
    return found, notes


def known(paths: list[Path]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """{label: {module: text}} of the known sources of a regrade: the reference first, where this checkout holds it,
    then those at `paths`. A folder holding the lab's modules is one source named after it; any other folder is a
    class (an earlier term's), each student a source named folder/student. A label given already keeps its first
    source, and the notes say so, as they say what a folder of modules leaves unread."""
    sources: dict[str, dict[str, str]] = reference()
    notes: list[str] = []

    def add(label: str, files: dict[str, str]) -> None:
        if label in sources:
            notes.append(f"known source {label}: skipped (a known source of that name is given already)")
        else:
            sources[label] = files

    for path in paths:
        path = Path(path)
        if any(os.path.lexists(path / f"{m}.py") for m in MODULES):
            add(path.name, _folder(str(path), path.name, notes))
            folders = sum(1 for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
            if folders:
                notes.append(f"known source {path.name}: read as one source, since it holds the lab's modules; its "
                             f"{folders} folder(s) were not read (give a class folder without module files in it)")
        else:
            found, said = collect(path, f"{path.name}/")
            notes += said
            for label, files in found.items():
                add(label, files)
    return sources, notes


def reference() -> dict[str, dict[str, str]]:
    """{REFERENCE_LABEL: {module: text}} where this checkout holds the reference (an instructor's), else {}."""
    files = {m: REFERENCE / f"{m}.py" for m in MODULES}
    return {REFERENCE_LABEL: {m: p.read_text() for m, p in files.items()}} if all(
        p.is_file() for p in files.values()) else {}


def stubs(folder: Path | None) -> dict[str, str]:
    """{module: stub text}: from `folder`, else generated from reference/ (exercises/ may be stale or edited)."""
    if folder is None and (REFERENCE / "context.py").is_file():
        from grader.judge.stub_source import stub_source

        return {p.module: stub_source((REFERENCE / f"{p.module}.py").read_text(), p.name) for p in PIECES.values()}
    folder = EXERCISES if folder is None else folder
    return {m: (folder / f"{m}.py").read_text() for m in MODULES if (folder / f"{m}.py").is_file()}


def _code_lines(text: str) -> list[str]:
    """The lines of `text`, those a string spans over several lines (a docstring) left empty."""
    # split as tokenize reads them, at "\n" alone: str.splitlines also splits at form feeds and the like, and a comment
    # full of them shifted every line number tokenize gives, blanking the code in place of the docstring
    lines = io.StringIO(text, newline="").readlines()
    try:
        for t in tokenize.generate_tokens(iter(lines).__next__):
            if t.type == tokenize.STRING and t.end[0] > t.start[0]:
                lines[t.start[0] - 1:t.end[0]] = ["\n"] * (t.end[0] - t.start[0] + 1)
    except (tokenize.TokenError, SyntaxError):  # what tokenizes is done; the rest is compared as it stands
        pass
    return lines


@functools.lru_cache(maxsize=len(MODULES) + 1)
def _stub_lines(stub: str) -> tuple[str, ...]:
    # once a stub, not once a student: tokenizing the stub again for each file was a fifth of a large class's time
    return tuple("".join(x.split()) for x in _code_lines(stub))


def written(text: str, stub: str | None) -> str:
    """The lines of `text` that are not the stub's, in order: what the student wrote."""
    if stub is None:
        return text
    # copydetect's boilerplate filter alone drops k-grams inside the stub, but keeps those that straddle
    # the stub and the answer: every answer opening with `return torch.` then shares a run with every other,
    # enough to score a one-line piece 0.8 against an honestly different one.
    # Docstrings out and lines compared without their spaces: a docstring line edited or respaced (a formatter, a
    # find-and-replace) is no answer, and kept without the rest of its docstring it turns all the code after it
    # into one string to the tokenizer, where a renamed copy matched nothing
    lines = _code_lines(text)
    matcher = difflib.SequenceMatcher(None, _stub_lines(stub), ["".join(x.split()) for x in lines], autojunk=False)
    kept = [lines[i] for op, _, _, j1, j2 in matcher.get_opcodes() if op in ("insert", "replace")
            for i in range(j1, j2) if lines[i].strip()]
    return "".join(x if x.endswith("\n") else x + "\n" for x in kept)
