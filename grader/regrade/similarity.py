"""The class regrade's similarity report: which students handed in the same code, piece by piece.

Built on copydetect (winnowed fingerprints of code whose names, strings, comments and layout are
normalised away), so a copy with renamed variables, new comments or another layout still matches. The
generated stubs are boilerplate: a piece left untouched, or the stub text around a solution, matches
nobody. Each piece is compared only with the same piece of every other student.

What it protects against: student code is hostile. Files are read without following links (a link is
skipped, as is anything not a plain file), at most MAX_BYTES each; the page escapes every student byte,
forbids scripts by its Content-Security-Policy and loads nothing from outside.

Its limits: a high score says two files share long runs of normalised tokens, not that anyone copied.
Pieces the spec nearly dictates match honestly when written the obvious way, and code both took from a
third source (a tutorial, an earlier year, the leaked reference) matches just as a copy does; a copy
rewritten token by token (a loop for a comprehension, other calls) is missed, and so is any copy of a
piece too short to tell (under MIN_SHARED). A piece's score is the larger of the two files' copied
shares, so a copy padded with code of its own still scores high.
"""
from __future__ import annotations

import difflib
import errno
import html
import io
import os
import re
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from grader import EXERCISES, REFERENCE
from grader.pieces import MODULES, PIECES
from grader.files import READ_FLAGS

MAX_BYTES = 256 * 1024  # a lab file is a few KB; more is padding meant to slow the report or bloat the page
NOISE = 25  # copydetect's k: the shortest run of normalised characters that counts as shared
# fewer shared normalised characters than this score a piece 0: the encoder's obvious three lines (about 40) or
# the one-line context are the same for anyone who writes them the natural way, and would flag half the class
MIN_SHARED = 2 * NOISE
PARALLEL_FROM = 200  # students from which the pieces are compared in processes side by side
MAX_SHOWN = 100  # pairs whose code the page shows
MAX_ROWS = 2000  # pairs its table lists (all are returned)
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_OURS = re.compile(r"<span class='highlight-(?:red|green)'>|</span>")  # the only markup copydetect adds


class CopydetectMissing(ImportError):
    """copydetect is not installed; the regrade goes on without its similarity report."""


def _copydetect() -> SimpleNamespace:
    try:
        import copydetect
        from copydetect import CodeFingerprint, CopyDetector, compare_files
        from copydetect.utils import highlight_overlap
    except ImportError as exc:
        raise CopydetectMissing(
            'the similarity report needs copydetect: pip install -e ".[regrade]"', name="copydetect") from exc
    return SimpleNamespace(version=copydetect.__version__, CopyDetector=CopyDetector, CodeFingerprint=CodeFingerprint,
                           compare_files=compare_files, highlight_overlap=highlight_overlap)


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
        from grader.judge.stubs import stub_source

        return {p.module: stub_source((REFERENCE / f"{p.module}.py").read_text(), p.name) for p in PIECES.values()}
    folder = EXERCISES if stubs is None else stubs
    return {m: (folder / f"{m}.py").read_text() for m in MODULES if (folder / f"{m}.py").is_file()}


def _written(text: str, stub: str | None) -> str:
    """The lines of `text` that are not the stub's, in order: what the student wrote."""
    if stub is None:
        return text
    # copydetect's boilerplate filter alone drops k-grams inside the stub, but keeps those that straddle
    # the stub and the answer: every answer opening with `return torch.` then shares a run with every other,
    # enough to score a one-line piece 0.8 against an honestly different one
    lines = text.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, [x.strip() for x in stub.splitlines()], [x.strip() for x in lines],
                                      autojunk=False)
    kept = [lines[i] for op, _, _, j1, j2 in matcher.get_opcodes() if op in ("insert", "replace")
            for i in range(j1, j2)]
    return "".join(x if x.endswith("\n") else x + "\n" for x in kept)


def _compare(texts: dict[str, str], stage: Path, cd: SimpleNamespace) -> tuple[list[str], np.ndarray]:
    """(students in order, their symmetric matrix of scores) for one piece."""
    stage.mkdir()
    names: dict[str, str] = {}  # staged path -> student
    # copydetect reads paths: stage the vetted text so that it never opens a student's file itself
    for student in sorted(texts):
        path = stage / f"{student}.py"
        path.write_text(texts[student], encoding="utf-8")
        names[str(path)] = student
    students = list(names.values())
    if len(students) < 2:
        return students, np.zeros((len(students), len(students)))
    # guarantee_t = noise_t: a window of 1 keeps every k-gram; a wider one keeps the least hash of each
    # window, and Python's str hash changes with PYTHONHASHSEED, so the scores would change run to run
    det = cd.CopyDetector(noise_t=NOISE, guarantee_t=NOISE, autoopen=False, silent=True,  # no browser, no tqdm
                          out_file=str(stage / "unused.html"))
    for path in sorted(stage.parent.glob("stubs/*.py")):
        det.add_file(str(path), type="boilerplate")
    for path in names:  # add_file, not test_dirs: copydetect lists a folder in set order, which varies
        det.add_file(path)
    det.run()
    sim = det.similarity_matrix  # [i, j] = (share of i found in j, share of j found in i); -1 where skipped
    scores = np.clip(np.maximum(sim[:, :, 0], sim[:, :, 1]), 0.0, 1.0).round(4)
    shared = det.token_overlap_matrix
    scores[np.maximum(shared, shared.T) < MIN_SHARED] = 0.0  # also the diagonal, which copydetect skips
    return students, scores


def _compare_one(texts: dict[str, str], stage: str) -> tuple[list[str], np.ndarray]:
    return _compare(texts, Path(stage), _copydetect())


def _compare_all(written: dict[str, dict[str, str]], tmp: Path) -> list[tuple[list[str], np.ndarray]]:
    """_compare for every piece: side by side in processes of their own for a large class (copydetect's loop
    is pure Python, so threads would not help), one after another for a small one, where starting costs more."""
    jobs = [(written[m], str(tmp / m)) for m in MODULES]
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2 or max(len(t) for t in written.values()) < PARALLEL_FROM:
        return [_compare_one(*job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked: the regrade's process has threads (its pools), and a fork copies their locks
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_compare_one, *zip(*jobs)))


def _highlight(texts: tuple[str, str], prints: tuple, cd: SimpleNamespace) -> tuple[str, str]:
    """The two files as escaped HTML with the runs they share marked, by the comparison the detector made
    (`prints`: their fingerprints, window 1, the stubs as boilerplate)."""
    _, _, slices = cd.compare_files(*prints)
    out = []
    for text, part, colour in zip(texts, slices, ("red", "green")):
        if not part.size:
            out.append(html.escape(text))
            continue
        marked, _ = cd.highlight_overlap(text, part, f"<span class='highlight-{colour}'>", "</span>", escape_html=True)
        # were a copydetect release ever to stop escaping, the file is shown escaped and unmarked instead
        out.append(marked if "<" not in _OURS.sub("", marked) else html.escape(text))
    return out[0], out[1]


def report(code: Path, out: Path, *, stubs: Path | None = None, threshold: float = 0.5) -> list[dict]:
    """Compare every student's pieces with every other's (same piece with same piece), the generated stubs taken as boilerplate; write the HTML report at `out`; return the pairs at or above `threshold`, highest first."""
    cd = _copydetect()
    pieces, notes = _collect(Path(code))
    stub_text = _stubs(stubs)
    written = {m: {s: _written(t, stub_text.get(m)) for s, t in pieces[m].items()} for m in MODULES}
    students = sorted({s for texts in pieces.values() for s in texts})
    where = {s: i for i, s in enumerate(students)}
    best = np.zeros((len(students), len(students)))
    per_piece = {}
    with tempfile.TemporaryDirectory(prefix="similarity-") as tmp:
        (Path(tmp) / "stubs").mkdir()
        for module, text in stub_text.items():
            (Path(tmp) / "stubs" / f"{module}.py").write_text(text, encoding="utf-8")
        # one detector per piece, not one with same_name_only: copydetect's loop and matrices are quadratic
        # in the files it holds (36 times the work and memory for six pieces in one)
        for module, (names, scores) in zip(MODULES, _compare_all(written, Path(tmp))):
            rows = np.array([where[s] for s in names], dtype=int)
            best[np.ix_(rows, rows)] = np.maximum(best[np.ix_(rows, rows)], scores)
            per_piece[module] = ({s: i for i, s in enumerate(names)}, scores)
    pairs = []
    for i, j in zip(*np.nonzero(np.triu(best >= threshold, 1))):
        a, b = students[i], students[j]
        found = {m: float(s[at[a], at[b]]) for m, (at, s) in per_piece.items() if a in at and b in at}
        if found:  # two students with no piece in common share nothing
            pairs.append({"a": a, "b": b, "score": max(found.values()), "pieces": found})
    pairs.sort(key=lambda p: (-p["score"], p["a"], p["b"]))
    # the code of the shown pairs only: copydetect's get_copied_code_list marks up every pair above its
    # display threshold at once, gigabytes for a large class where many share an idiom
    boilerplate = np.unique(np.array([h for t in stub_text.values()
                                      for h in cd.CodeFingerprint("stub.py", NOISE, 1, fp=io.StringIO(t)).hashes],
                                     dtype=np.int64))
    # each file fingerprinted once a piece however many shown pairs hold it: a file padded to MAX_BYTES takes a
    # second or more to tokenize, and a few such files copied from one another would be tokenized once a pair
    shown: list[dict] = [{} for _ in pairs[:MAX_SHOWN]]
    for m in MODULES:
        prints: dict[str, object] = {}
        for p, marked in zip(pairs, shown):
            if m in p["pieces"] and p["pieces"][m] >= threshold and p["pieces"][m] > 0:
                for who in (p["a"], p["b"]):
                    if who not in prints:
                        prints[who] = cd.CodeFingerprint("piece.py", NOISE, 1, boilerplate,
                                                         fp=io.StringIO(written[m][who]))
                marked[m] = _highlight((written[m][p["a"]], written[m][p["b"]]), (prints[p["a"]], prints[p["b"]]),
                                       cd)
    page = _page(pairs, shown, pieces, len(students), notes, threshold, cd.version)
    Path(out).write_text(page, encoding="utf-8")
    return pairs


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.hi{background:#fdd}
.cols{display:flex;gap:1em}.cols pre{flex:1;overflow:auto;background:#f8f8f8;padding:.5em;font-size:small}
.highlight-red{background:#f2b6b6}.highlight-green{background:#b6f2b6}"""


def _page(pairs: list[dict], shown: list[dict], pieces: dict, students: int, notes: list[str], threshold: float,
          version: str) -> str:
    e = html.escape
    out = ['<!DOCTYPE html><html><head><meta charset="utf-8">',
           # defence in depth: were a student's byte ever left unescaped, no script would run, nothing would load
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">',
           f"<title>Similarity report</title><style>{_STYLE}</style></head><body>",
           "<h1>Similarity report</h1>",
           f"<p>{students} students, each piece compared with the same piece only, the stubs' lines left out. "
           f"A piece's score is the larger share of either file found in the other, in runs of {NOISE} or more "
           f"characters once names, strings, comments and layout are normalised (copydetect {e(version)}), and 0 "
           f"under {MIN_SHARED} such characters shared; a pair's score is its highest piece's. "
           f"{len(pairs)} pairs at or above {threshold:g}.</p>",
           "<p>Files per piece: " + ", ".join(f"{m} {len(pieces[m])}" for m in MODULES) + "</p>",
           "<h2>Flagged pairs</h2>"]
    if pairs:
        out.append("<table><tr><th>#</th><th>a</th><th>b</th><th>score</th>"
                   + "".join(f"<th>{m}</th>" for m in MODULES) + "</tr>")
        for n, p in enumerate(pairs[:MAX_ROWS], 1):
            cells = "".join("<td></td>" if m not in p["pieces"] else
                            f'<td{" class=hi" if p["pieces"][m] >= threshold else ""}>{p["pieces"][m]:.2f}</td>'
                            for m in MODULES)
            link = f'<a href="#pair{n}">{n}</a>' if n <= len(shown) else str(n)
            out.append(f"<tr><td>{link}</td><td>{e(p['a'])}</td><td>{e(p['b'])}</td>"
                       f"<td>{p['score']:.2f}</td>{cells}</tr>")
        out.append("</table>")
        if len(pairs) > MAX_ROWS:
            out.append(f"<p>{len(pairs) - MAX_ROWS} more pairs are left out here; a higher threshold lists them.</p>")
    else:
        out.append("<p>None.</p>")
    if len(pairs) > len(shown):
        out.append(f"<p>The code of the first {len(shown)} pairs follows.</p>")
    for n, (p, code) in enumerate(zip(pairs, shown), 1):
        out.append(f'<h3 id="pair{n}">{n}. {e(p["a"])} and {e(p["b"])}: {p["score"]:.2f}</h3>')
        for module in (m for m in MODULES if m in code):
            ca, cb = code[module]
            out.append(f'<details{" open" if p["pieces"][module] == p["score"] else ""}><summary>{module}.py: '
                       f'{p["pieces"][module]:.2f} (red: {e(p["a"])}, green: {e(p["b"])}; what each wrote, '
                       f'the stub left out)</summary><div class="cols"><pre>{ca}</pre><pre>{cb}</pre></div></details>')
    if notes:
        out.append("<h2>Files left out</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    out.append("</body></html>\n")
    return "\n".join(out)
