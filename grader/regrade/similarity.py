"""The class regrade's similarity report: which students handed in the same code, piece by piece, and whose code
is a known source's.

Built on copydetect's fingerprints (every run of NOISE characters of code whose names, strings, comments and
layout are normalised away), so a copy with renamed variables, new comments or another layout still matches. The
generated stubs are boilerplate: a piece left untouched, or the stub text around a solution (its docstrings
too, edited or not), matches nobody. Each piece is compared only with the same piece of every other student, and
with the same piece of every known source (MOSS's and Dolos's base and prior files): the lab's reference, which an
instructor's regrade holds and the published solutions repeat, and any earlier term's class folder given.

What most of the class writes is the assignment, not a copy (MOSS's -m, Dolos's fragment percentage): a run shared
by at least COMMON_MIN (3) of the students who wrote a piece and by more than COMMON_SHARE (20%) of them is ignored,
in the scores and the highlights, as is a short piece (under MIN_SHARED normalised characters) that many hand in
identically, or that is a known source's. A student whose piece is a known source's, identical and not short, is
not counted among those writers: six who paste the reference do not make its lines the assignment's, so a classmate
who pasted it and renamed its variables still matches it. Runs are counted by their text, not copydetect's hashes,
so the report is the same under any hash seed. Small classes: a run only two students share always counts, so a
class of two ignores nothing but the stubs (the dictated lines can flag the pair; a person reads it) and a class of
three only what all three write.

Two pieces identical once comments and layout are left out (names and strings kept) are reported as identical,
score 1, however short: the MIN_SHARED floor below is for likeness, not for sameness.

What the page puts first is what no known source explains (grader.regrade.similarity_findings): a pair of students
whose piece matches the same known source is that source's, and three or more students handing in one piece alike
are one group, not every pair of them.

What it protects against: student code is hostile, an earlier term's too. Files are read without following links
(a link is skipped, as is anything not a plain file), at most MAX_BYTES each (grader.regrade.similarity_input),
and fingerprinted from memory; the page escapes every student byte, forbids scripts by its Content-Security-Policy
and loads nothing from outside.

Its limits: a high score says two files share long runs of normalised tokens, not that anyone copied.
Lines the spec nearly dictates still match honestly where few write them alike (a small class; two students alone in
writing the reference's order of them), and code both took from a third source not given as known (a tutorial, a
leaked copy) matches just as a copy does, unless over a fifth of the class took it too: then it is ignored like
the dictated lines, and a copy ring that large shows only where its pieces are identical and not short. A copy
rewritten token by token (a loop for a comprehension, other calls) is missed, and so is a copy too short to tell
(under MIN_SHARED shared characters) unless it is identical. A piece's score is the larger of the two files'
copied shares, so a copy padded with code of its own still scores high.
"""
from __future__ import annotations

import html
import io
import os
import re
import tokenize
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from grader.core.pieces import MODULES
from grader.regrade import similarity_findings, similarity_input, similarity_page
from grader.regrade.similarity_findings import Compared, Findings


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
MAX_BYTES = similarity_input.MAX_BYTES  # read at most, a file
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
    # the lexer named, not looked up from the file name: the lookup cost more than lexing a short piece
    return detector.CodeFingerprint(name, NOISE, 1, language="python", fp=io.StringIO(text))


def _ignore(fp, ignored: set[int], detector: SimpleNamespace):
    """`fp` without the k-grams hashed in `ignored`, not counted in its size either."""
    # left out here rather than by copydetect's boilerplate argument: that one intersects with assume_unique
    # on a file's k-grams, which repeat, and so also drops k-grams that merely occur twice
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in ignored}
    fp.hashes = set(fp.hash_idx)
    fp.token_coverage = detector.get_token_coverage(fp.hash_idx, NOISE, len(fp.filtered_code))
    return fp


def _overlaps(filtered: list[str], skipped: set[str]) -> np.ndarray:
    """(D, D) integers: [p, q] is how many characters of text p lie in a k-gram it shares with text q, the `skipped`
    k-grams left out. That is copydetect's token overlap (compare_files' first count, and the numerator of its
    shares), for every pair at once: only texts that share a k-gram are looked at, and each text once."""
    vocab: dict[str, int] = {}
    at = []  # each text's k-grams by position, as ids; -1 where skipped
    for f in filtered:
        grams = (f[i:i + NOISE] for i in range(len(f) - NOISE + 1))
        at.append(np.array([-1 if g in skipped else vocab.setdefault(g, len(vocab)) for g in grams], dtype=np.int64))
    # which texts hold each k-gram: a CSR table, holders of gram u in flat[start[u]:start[u + 1]]
    held = [np.unique(a[a >= 0]) for a in at]
    grams_of = np.concatenate(held) if held else np.zeros(0, dtype=np.int64)
    texts_of = np.repeat(np.arange(len(at)), [len(h) for h in held])
    order = np.lexsort((texts_of, grams_of))
    flat = texts_of[order]
    start = np.concatenate(([0], np.cumsum(np.bincount(grams_of, minlength=len(vocab)))))
    overlap = np.zeros((len(at), len(at)), dtype=np.int64)
    for p, a in enumerate(at):
        pos = np.nonzero(a >= 0)[0]
        if not pos.size:
            continue
        first, count = start[a[pos]], start[a[pos] + 1] - start[a[pos]]
        # every (holder, position) of p's k-grams, gathered without a Python loop over them
        gather = np.repeat(first - np.cumsum(count) + count, count) + np.arange(count.sum())
        others, row = np.unique(flat[gather], return_inverse=True)
        marks = np.zeros((len(others), len(a) + 1), dtype=np.int32)
        marks[row.ravel(), np.repeat(pos, count) + 1] = 1
        runs = marks.cumsum(axis=1)  # runs[:, i]: the k-grams shared before position i
        c = np.arange(len(filtered[p]))
        # character c lies in a shared k-gram starting anywhere from c - NOISE + 1 to c
        lo, hi = np.clip(c - NOISE + 1, 0, len(a)), np.minimum(c, len(a) - 1) + 1
        overlap[p, others] = ((runs[:, hi] - runs[:, lo]) > 0).sum(axis=1)
    np.fill_diagonal(overlap, 0)
    return overlap


def _compare(texts: dict[str, str], sources: dict[str, str], stub_grams: set[str],
             detector: SimpleNamespace) -> Compared:
    """One piece's comparison, the stubs' k-grams (`stub_grams`) left out. The text is fingerprinted from memory:
    no student file is opened."""
    students, labels = sorted(texts), list(sources)
    n = len(students)
    every = [texts[s] for s in students] + [sources[x] for x in labels]
    distinct: dict[str, int] = {}
    # a text handed in many times (the reference, pasted) is fingerprinted and compared once
    of = np.array([distinct.setdefault(t, len(distinct)) for t in every], dtype=int)
    prints = [_prints(t, detector, "written.py") for t in distinct]
    filtered = [fp.filtered_code for fp in prints]
    layout = [_without_layout(t) if f else "" for t, f in zip(distinct, filtered)]
    groups: dict[str, list[int]] = {}
    for i in range(len(every)):
        if filtered[of[i]]:  # an untouched stub writes nothing and shares nothing
            groups.setdefault(layout[of[i]], []).append(i)
    # a known source's code, long enough to tell, handed in by students says nothing of what the class writes alike
    sourced = {i for g in groups.values() if g[-1] >= n and len(filtered[of[g[0]]]) >= MIN_SHARED for i in g if i < n}
    grams = [_grams(f) for f in filtered]
    counted = [i for i in range(n) if filtered[of[i]] and i not in sourced]
    writers = len(counted)
    # k-grams as strings, not copydetect's hashes: str hashes change with PYTHONHASHSEED and between processes
    counts = Counter(g for i in counted for g in grams[of[i]])
    common = sorted(g for g, c in counts.items() if _common(c, writers))
    skipped = stub_grams.union(common)
    ignored = {hash(g) for g in skipped}
    prints = [_ignore(fp, ignored, detector) for fp in prints]
    overlap = _overlaps(filtered, skipped)
    cover = np.array([float(fp.token_coverage) for fp in prints])
    scores = np.zeros_like(overlap, dtype=float)
    # copydetect's compare_files(p, q) for every pair p < q: p's overlap decides the floor, the larger share the score
    p, q = np.nonzero(np.triu(overlap >= MIN_SHARED, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.maximum(overlap[p, q] / cover[p], overlap[q, p] / cover[q])
    scores[p, q] = scores[q, p] = np.round(np.clip(np.nan_to_num(shares), 0.0, 1.0), 4)
    scores = scores[np.ix_(of, of)]
    same = np.zeros_like(scores, dtype=bool)
    note = ""
    for members in groups.values():
        held = [i for i in members if i < n]
        if len(filtered[of[members[0]]]) >= MIN_SHARED:
            if len(members) > 1:
                same[np.ix_(members, members)] = True
        elif members[-1] >= n:  # short code a known source writes too: the natural way to write it
            if held:
                note += f"{len(held)} of the {writers} who wrote it hand in {labels[members[-1] - n]}'s short code; "
        elif _common(len(members), writers):  # the obvious one-liner many type alike is the assignment's
            note += f"{len(members)} of the {writers} who wrote it hand in the same short code; "
        elif len(members) > 1:
            same[np.ix_(members, members)] = True
    np.fill_diagonal(same, False)
    scores[same] = 1.0
    np.fill_diagonal(scores, 0.0)
    return Compared(students, labels, scores[:n, :n], same[:n, :n], scores[:n, n:], same[:n, n:], common,
                    note.rstrip("; "))


def _compare_one(texts: dict[str, str], sources: dict[str, str], stub: str | None, stub_grams: set[str]) -> Compared:
    """_compare of the files as handed in: what each wrote is found here, in the process that compares them."""
    def written(files: dict[str, str]) -> dict[str, str]:
        return {who: similarity_input.written(t, stub) for who, t in files.items()}

    return _compare(written(texts), written(sources), stub_grams, _copydetect())


def _compare_all(texts: dict[str, dict[str, str]], sources: dict[str, dict[str, str]], stubs: dict[str, str],
                 stub_grams: set[str]) -> list[Compared]:
    """_compare for every piece: side by side in processes of their own for a large class (tokenizing is pure
    Python, so threads would not help), one after another for a small one, where starting costs more."""
    jobs = [(texts[m], sources[m], stubs.get(m), stub_grams) for m in MODULES]
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2 or max(len(t) + len(k) for t, k, _, _ in jobs) < PARALLEL_FROM:
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


def _shown(findings: Findings, texts: dict[str, dict[str, str]], stubs: dict[str, str], stub_grams: set[str],
           common: dict[str, list[str]], threshold: float, detector: SimpleNamespace) -> list[dict]:
    """The code of the first MAX_SHOWN pairs, what each wrote, marked: {module: (a's, b's)} for each flagged
    piece."""
    # the code of the shown pairs only: copydetect's get_copied_code_list marks up every pair above its
    # display threshold at once, gigabytes for a large class where many share an idiom
    # each file fingerprinted once a piece however many shown pairs hold it: a file padded to MAX_BYTES takes a
    # second or more to tokenize, and a few such files copied from one another would be tokenized once a pair
    pairs = findings.pairs[:MAX_SHOWN]
    shown: list[dict] = [{} for _ in pairs]
    for m in MODULES:
        prints: dict[str, object] = {}
        written = {who: similarity_input.written(texts[m][who], stubs.get(m)) for p in pairs for who in (p["a"], p["b"])
                   if who in texts[m]}
        skip = {hash(g) for g in stub_grams.union(common[m])}  # hashed here: a worker process hashes otherwise
        for p, marked in zip(pairs, shown):
            if m in p["pieces"] and p["pieces"][m] >= threshold and p["pieces"][m] > 0:
                for who in (p["a"], p["b"]):
                    if who not in prints:
                        prints[who] = _ignore(_prints(written[who], detector), skip, detector)
                marked[m] = _highlight((written[p["a"]], written[p["b"]]), (prints[p["a"]], prints[p["b"]]), detector)
    return shown


def report(code: Path, out: Path, *, stubs: Path | None = None, threshold: float = 0.5,
           known: dict[str, dict[str, str]] | None = None, known_notes: list[str] | None = None) -> Findings:
    """Compare every student's pieces with every other's (same piece with same piece) and with the `known` sources'
    ({label: {module: text}}: similarity_input.reference() and .known()), the stubs and what the class writes alike
    left out; write the HTML report at `out`; return what it found, what no known source explains first."""
    detector = _copydetect()
    found, notes = similarity_input.collect(Path(code))
    known = known or {}
    stub_text = similarity_input.stubs(stubs)

    def of(texts: dict[str, dict[str, str]], m: str) -> dict[str, str]:
        return {who: t[m] for who, t in texts.items() if m in t}

    mine = {m: of(found, m) for m in MODULES}
    # the stubs' k-grams, once for every piece's comparison and its highlights
    stub_grams = _stub_grams([stub_text[m] for m in sorted(stub_text)], detector)
    # each piece compared apart, not all in one detector: the loop is quadratic in the files it holds (36 times the
    # work for six pieces in one)
    compared = dict(zip(MODULES, _compare_all(mine, {m: of(known, m) for m in MODULES}, stub_text, stub_grams)))
    students = sorted(s for s, t in found.items() if t)
    findings = similarity_findings.find(compared, students, threshold)
    shown = _shown(findings, mine, stub_text, stub_grams, {m: c.common for m, c in compared.items()}, threshold, detector)
    method = similarity_page.Method(detector.version, NOISE, MIN_SHARED, COMMON_SHARE, COMMON_MIN)
    common_notes = [f"{m}.py: {c.note}" for m, c in compared.items() if c.note]
    page = similarity_page.page(findings, shown, {m: len(mine[m]) for m in MODULES}, len(students),
                                notes + (known_notes or []), threshold, method, common_notes, sorted(known))
    Path(out).write_text(page, encoding="utf-8")
    return findings
