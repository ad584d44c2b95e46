"""The class regrade's similarity report: which students handed in the same code, piece by piece.

Built on copydetect's fingerprints (every run of NOISE characters of code whose names, strings, comments and
layout are normalised away), so a copy with renamed variables, new comments or another layout still matches. The
generated stubs are boilerplate: a piece left untouched, or the stub text around a solution (its docstrings
too, edited or not), matches nobody. Each piece is compared only with the same piece of every other student.

What most of the class writes is the assignment, not a copy (MOSS's -m, Dolos's fragment percentage): a run shared
by at least COMMON_MIN (3) of the students who wrote a piece and by more than COMMON_SHARE (20%) of them is ignored,
in the scores and the highlights, as is a short piece (under MIN_SHARED normalised characters) that many hand in
identically. Runs are counted by their text, not copydetect's hashes, so the report is the same under any hash
seed. Small classes: a run only two students share always counts, so a class of two ignores nothing but the stubs
(the dictated lines can flag the pair; a person reads it) and a class of three only what all three write.

Two pieces identical once comments and layout are left out (names and strings kept) are reported as identical,
score 1, however short: the MIN_SHARED floor below is for likeness, not for sameness.

What it protects against: student code is hostile. Files are read without following links (a link is
skipped, as is anything not a plain file), at most MAX_BYTES each, and fingerprinted from memory; the page escapes
every student byte, forbids scripts by its Content-Security-Policy and loads nothing from outside.

Its limits: a high score says two files share long runs of normalised tokens, not that anyone copied.
Lines the spec nearly dictates still match honestly where few write them alike (a small class; two students alone in
writing the reference's order of them), and code both took from a third source (a tutorial, an earlier year, the
leaked reference) matches just as a copy does, unless over a fifth of the class took it too: then it is ignored like
the dictated lines, and a copy ring that large shows only where its pieces are identical and not short. A copy
rewritten token by token (a loop for a comprehension, other calls) is missed, and so is a copy too short to tell
(under MIN_SHARED shared characters) unless it is identical. A piece's score is the larger of the two files'
copied shares, so a copy padded with code of its own still scores high.
"""
from __future__ import annotations

import difflib
import errno
import html
import io
import os
import re
import stat
import tokenize
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from grader import EXERCISES, REFERENCE
from grader.core.files import READ_FLAGS
from grader.core.pieces import MODULES, PIECES
from grader.regrade import similarity_page

MAX_BYTES = 256 * 1024  # a lab file is a few KB; more is padding meant to slow the report or bloat the page
NOISE = 25  # copydetect's k: the shortest run of normalised characters that counts as shared
# fewer shared normalised characters than this score a piece 0: the encoder's obvious three lines (about 40) or
# the one-line context are the same for anyone who writes them the natural way, and would flag half the class
MIN_SHARED = 2 * NOISE
# what the task dictates (the mask filled with -inf, the softmax over the last dimension, the reference's one-line
# context) is written alike by many, a copy by two or three; what only two share can be either, so it always counts
COMMON_SHARE = 0.2
COMMON_MIN = 3
PARALLEL_FROM = 200  # students from which the pieces are compared in processes side by side
MAX_SHOWN = 100  # pairs whose code the page shows
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_OURS = re.compile(r"<span class='highlight-(?:red|green)'>|</span>")  # the only markup copydetect adds


class CopydetectMissing(ImportError):
    """copydetect is not installed; the regrade goes on without its similarity report."""


def _copydetect() -> SimpleNamespace:
    try:
        import copydetect
        from copydetect import CodeFingerprint, compare_files
        from copydetect.utils import get_token_coverage, highlight_overlap
    except ImportError as exc:
        raise CopydetectMissing(
            'the similarity report needs copydetect: pip install -e ".[regrade]"', name="copydetect") from exc
    return SimpleNamespace(version=copydetect.__version__, CodeFingerprint=CodeFingerprint, compare_files=compare_files,
                           highlight_overlap=highlight_overlap, get_token_coverage=get_token_coverage)


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


def _collect(code: Path) -> tuple[dict[str, dict[str, str]], list[str]]:
    """{module: {student: text}} of every student folder in `code`, and notes on what was skipped."""
    pieces: dict[str, dict[str, str]] = {m: {} for m in MODULES}
    notes: list[str] = []
    for entry in sorted(os.scandir(code), key=lambda e: e.name):
        if not _NAME.fullmatch(entry.name) or entry.name.startswith("."):
            notes.append(f"{entry.name!r}: skipped (not a student folder name)")
            continue
        if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
            notes.append(f"{entry.name}: skipped (a link or not a folder)")
            continue
        try:  # opened without following a link swapped in since the scan, and read through that descriptor
            folder = os.open(entry.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            notes.append(f"{entry.name}: skipped ({exc.strerror})")
            continue
        try:
            for module in MODULES:
                text, note = _read(folder, f"{module}.py")
                if note:
                    notes.append(f"{entry.name}/{module}.py: {note}")
                if text is not None:
                    pieces[module][entry.name] = text
        finally:
            os.close(folder)
    return pieces, notes


def _stubs(stubs: Path | None) -> dict[str, str]:
    """{module: stub text}: from `stubs`, else generated from reference/ (exercises/ may be stale or edited)."""
    if stubs is None and (REFERENCE / "context.py").is_file():
        from grader.judge.stub_source import stub_source

        return {p.module: stub_source((REFERENCE / f"{p.module}.py").read_text(), p.name) for p in PIECES.values()}
    folder = EXERCISES if stubs is None else stubs
    return {m: (folder / f"{m}.py").read_text() for m in MODULES if (folder / f"{m}.py").is_file()}


def _code_lines(text: str) -> list[str]:
    """The lines of `text`, those a string spans over several lines (a docstring) left empty."""
    lines = text.splitlines(keepends=True)
    try:
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            if t.type == tokenize.STRING and t.end[0] > t.start[0]:
                lines[t.start[0] - 1:t.end[0]] = ["\n"] * (t.end[0] - t.start[0] + 1)
    except (tokenize.TokenError, SyntaxError):  # what tokenizes is done; the rest is compared as it stands
        pass
    return lines


def _written(text: str, stub: str | None) -> str:
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
    matcher = difflib.SequenceMatcher(None, ["".join(x.split()) for x in _code_lines(stub)],
                                      ["".join(x.split()) for x in lines], autojunk=False)
    kept = [lines[i] for op, _, _, j1, j2 in matcher.get_opcodes() if op in ("insert", "replace")
            for i in range(j1, j2) if lines[i].strip()]
    return "".join(x if x.endswith("\n") else x + "\n" for x in kept)


def _without_layout(text: str) -> str:
    """`text` without its comments and layout, names and strings kept: what 'identical' compares."""
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER)]
        return " ".join(t.string if t.type not in (tokenize.INDENT, tokenize.DEDENT) else tokenize.tok_name[t.type]
                        for t in toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):  # code that does not tokenize: layout only
        return " ".join(text.split())


def _common(count: int, writers: int) -> bool:
    """Whether `count` of the `writers` of a piece sharing something makes it the assignment's."""
    return count >= COMMON_MIN and count > COMMON_SHARE * writers


def _grams(filtered: str) -> set[str]:
    return {filtered[i:i + NOISE] for i in range(len(filtered) - NOISE + 1)}


def _stub_grams(stubs: list[str], detector: SimpleNamespace) -> set[str]:
    return {g for t in stubs for g in _grams(_prints(t, detector, "stub.py").filtered_code)}


def _prints(text: str, detector: SimpleNamespace, name: str = "piece.py"):
    # a window of 1 keeps every k-gram; a wider one keeps the least hash of each window, and Python's str hash
    # changes with PYTHONHASHSEED, so the scores would change run to run
    return detector.CodeFingerprint(name, NOISE, 1, fp=io.StringIO(text))


def _ignore(fp, ignored: set[int], detector: SimpleNamespace):
    """`fp` without the k-grams hashed in `ignored`, not counted in its size either."""
    # left out here rather than by copydetect's boilerplate argument: that one intersects with assume_unique
    # on a file's k-grams, which repeat, and so also drops k-grams that merely occur twice
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in ignored}
    fp.hashes = set(fp.hash_idx)
    fp.token_coverage = detector.get_token_coverage(fp.hash_idx, NOISE, len(fp.filtered_code))
    return fp


def _compare(texts: dict[str, str], stub_grams: set[str], detector: SimpleNamespace) -> tuple[list[str], np.ndarray,
                                                                                         np.ndarray, list[str], str]:
    """(students in order, their symmetric matrix of scores, where they are identical, the common k-grams, a note
    on common identical code) for one piece, the stubs' k-grams (`stub_grams`) left out. The text is fingerprinted
    from memory: no student file is opened."""
    students = sorted(texts)
    n = len(students)
    scores, same = np.zeros((n, n)), np.zeros((n, n), dtype=bool)
    prints = [_prints(texts[s], detector, "written.py") for s in students]
    filtered = [fp.filtered_code for fp in prints]
    writers = sum(bool(f) for f in filtered)  # an untouched stub writes nothing and shares nothing
    # k-grams as strings, not copydetect's hashes: str hashes change with PYTHONHASHSEED and between processes
    counts: dict[str, int] = {}
    for f in filtered:
        for g in _grams(f):
            counts[g] = counts.get(g, 0) + 1
    common = sorted(g for g, c in counts.items() if _common(c, writers))
    ignored = {hash(g) for g in stub_grams.union(common)}
    prints = [_ignore(fp, ignored, detector) for fp in prints]
    for i in range(n):
        for j in range(i + 1, n):
            shared, (si, sj), _ = detector.compare_files(prints[i], prints[j])
            if shared >= MIN_SHARED:
                scores[i, j] = scores[j, i] = round(min(max(si, sj, 0.0), 1.0), 4)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(students):
        if filtered[i]:
            groups.setdefault(_without_layout(texts[s]), []).append(i)
    note = ""
    for members in groups.values():
        # the obvious one-liner many type alike is the assignment's; longer code that many hand in alike is not
        if len(filtered[members[0]]) < MIN_SHARED and _common(len(members), writers):
            note += f"{len(members)} of the {writers} who wrote it hand in the same short code; "
        elif len(members) > 1:
            at = np.ix_(members, members)
            same[at], scores[at] = True, 1.0
    np.fill_diagonal(same, False)
    np.fill_diagonal(scores, 0.0)
    return students, scores, same, common, note.rstrip("; ")


def _compare_one(texts: dict[str, str], stub_grams: set[str]) -> tuple:
    return _compare(texts, stub_grams, _copydetect())


def _compare_all(written: dict[str, dict[str, str]], stub_grams: set[str]) -> list[tuple]:
    """_compare for every piece: side by side in processes of their own for a large class (copydetect's loop
    is pure Python, so threads would not help), one after another for a small one, where starting costs more."""
    jobs = [(written[m], stub_grams) for m in MODULES]
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2 or max(len(t) for t in written.values()) < PARALLEL_FROM:
        return [_compare_one(*job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked: the regrade's process has threads (its pools), and a fork copies their locks
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_compare_one, *zip(*jobs)))


def _highlight(texts: tuple[str, str], prints: tuple, detector: SimpleNamespace) -> tuple[str, str]:
    """The two files as escaped HTML with the runs they share marked, by the comparison the detector made
    (`prints`: their fingerprints, window 1, the stubs as boilerplate)."""
    _, _, slices = detector.compare_files(*prints)
    out = []
    for text, part, colour in zip(texts, slices, ("red", "green")):
        if not part.size:
            out.append(html.escape(text))
            continue
        marked, _ = detector.highlight_overlap(text, part, f"<span class='highlight-{colour}'>", "</span>",
                                               escape_html=True)
        # were a copydetect release ever to stop escaping, the file is shown escaped and unmarked instead
        out.append(marked if "<" not in _OURS.sub("", marked) else html.escape(text))
    return out[0], out[1]


def report(code: Path, out: Path, *, stubs: Path | None = None, threshold: float = 0.5) -> list[dict]:
    """Compare every student's pieces with every other's (same piece with same piece), the stubs and what the class
    writes alike left out; write the HTML report at `out`; return the pairs at or above `threshold`, highest first
    ({a, b, score, pieces: {module: score}, identical: [module]})."""
    detector = _copydetect()
    pieces, notes = _collect(Path(code))
    stub_text = _stubs(stubs)
    written = {m: {s: _written(t, stub_text.get(m)) for s, t in pieces[m].items()} for m in MODULES}
    students = sorted({s for texts in pieces.values() for s in texts})
    where = {s: i for i, s in enumerate(students)}
    best = np.zeros((len(students), len(students)))
    per_piece, ignored, common_notes = {}, {}, []
    # the stubs' k-grams, once for every piece's comparison and its highlights
    stub_grams = _stub_grams([stub_text[m] for m in sorted(stub_text)], detector)
    # each piece compared apart, not all in one detector: the loop is quadratic in the files it holds (36 times the
    # work for six pieces in one)
    for module, (names, scores, same, common, note) in zip(MODULES, _compare_all(written, stub_grams)):
        rows = np.array([where[s] for s in names], dtype=int)
        best[np.ix_(rows, rows)] = np.maximum(best[np.ix_(rows, rows)], scores)
        per_piece[module] = ({s: i for i, s in enumerate(names)}, scores, same)
        ignored[module] = common
        if note:
            common_notes.append(f"{module}.py: {note}")
    pairs = []
    for i, j in zip(*np.nonzero(np.triu(best >= threshold, 1))):
        a, b = students[i], students[j]
        found = {m: float(s[at[a], at[b]]) for m, (at, s, _) in per_piece.items() if a in at and b in at}
        if found:  # two students with no piece in common share nothing
            pairs.append({"a": a, "b": b, "score": max(found.values()), "pieces": found,
                          "identical": [m for m in MODULES if m in found and per_piece[m][2][
                              per_piece[m][0][a], per_piece[m][0][b]]]})
    pairs.sort(key=lambda p: (-p["score"], p["a"], p["b"]))
    # the code of the shown pairs only: copydetect's get_copied_code_list marks up every pair above its
    # display threshold at once, gigabytes for a large class where many share an idiom
    # each file fingerprinted once a piece however many shown pairs hold it: a file padded to MAX_BYTES takes a
    # second or more to tokenize, and a few such files copied from one another would be tokenized once a pair
    shown: list[dict] = [{} for _ in pairs[:MAX_SHOWN]]
    for m in MODULES:
        prints: dict[str, object] = {}
        skip = {hash(g) for g in stub_grams.union(ignored[m])}  # hashed here: a worker process hashes otherwise
        for p, marked in zip(pairs, shown):
            if m in p["pieces"] and p["pieces"][m] >= threshold and p["pieces"][m] > 0:
                for who in (p["a"], p["b"]):
                    if who not in prints:
                        prints[who] = _ignore(_prints(written[m][who], detector), skip, detector)
                marked[m] = _highlight((written[m][p["a"]], written[m][p["b"]]), (prints[p["a"]], prints[p["b"]]),
                                       detector)
    method = similarity_page.Method(detector.version, NOISE, MIN_SHARED, COMMON_SHARE, COMMON_MIN)
    page = similarity_page.page(pairs, shown, {m: len(pieces[m]) for m in MODULES}, len(students), notes, threshold,
                                method, common_notes)
    Path(out).write_text(page, encoding="utf-8")
    return pairs
