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
from grader.regrade import similarity_findings, similarity_input, similarity_overlap, similarity_page
from grader.regrade.similarity_findings import NEAR, Compared, Findings
from grader.regrade.similarity_overlap import MIN_SHARED, NOISE


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


def _compare(texts: dict[str, str], sources: dict[str, str], stub_grams: set[str], detector: SimpleNamespace,
             threshold: float) -> Compared:
    """One piece's comparison, the stubs' k-grams (`stub_grams`) left out. The text is fingerprinted from memory:
    no student file is opened."""
    students, labels = sorted(texts), list(sources)
    n = len(students)
    every = [texts[s] for s in students] + [sources[x] for x in labels]
    distinct: dict[str, int] = {}
    # a text handed in many times (the reference, pasted) is fingerprinted and compared once
    of = np.array([distinct.setdefault(t, len(distinct)) for t in every], dtype=int)
    filtered = [_prints(t, detector, "written.py").filtered_code for t in distinct]
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
    scores, close, share = similarity_overlap.scored(*similarity_overlap.overlaps(filtered, skipped), NEAR)
    at = np.ix_(of, of)
    scores, close, share = scores[at], close[at], share[at]
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
    scores[same], close[same] = 1.0, True
    np.fill_diagonal(scores, 0.0)
    np.fill_diagonal(close, False)
    match = _match(share[:n, n:], same[:n, n:], threshold)
    explained = _explained(match, of[:n], filtered, of[n:], skipped, threshold)
    return Compared(students, labels, scores[:n, :n], same[:n, :n], close[:n, :n], match, explained, common,
                    note.rstrip("; "))


def _match(share: np.ndarray, same: np.ndarray, threshold: float) -> list[tuple[int, float, bool] | None]:
    """Each student's known source: (its index, the student's share found in it, identical), the identical first,
    then the highest share at or above `threshold`; None where none. The student's own share, not the larger one: a
    student who hides a copy among the reference's lines, or a short file from an earlier term, matches it no more
    than the rest of their code does."""
    out: list[tuple[int, float, bool] | None] = []
    for i in range(share.shape[0]):
        best = max(((bool(same[i, k]), 1.0 if same[i, k] else float(share[i, k]), -k) for k in range(share.shape[1])),
                   default=None)
        ok = best is not None and (best[0] or (best[1] >= threshold and best[1] > 0))
        out.append((-best[2], round(best[1], 4), best[0]) if ok else None)
    return out


def _explained(match: list, of: np.ndarray, filtered: list[str], source_of: np.ndarray, skipped: set[str],
               threshold: float) -> np.ndarray:
    """(n, n): whether two students matching the same known source share nothing beyond it: their score with the
    source's k-grams left out too (as MOSS and Dolos treat a base file) is under `threshold`. Two who also share code
    of their own, beside a pasted reference, stay a pair."""
    explained = np.zeros((len(match), len(match)), dtype=bool)
    for k in sorted({m[0] for m in match if m}):
        held = [i for i, m in enumerate(match) if m and m[0] == k]
        if len(held) < 2:
            continue
        texts = sorted({int(of[i]) for i in held})
        beyond = skipped.union(_grams(filtered[source_of[k]]))
        overlap, cover = similarity_overlap.overlaps([filtered[d] for d in texts], beyond)
        left, _, _ = similarity_overlap.scored(overlap, cover, NEAR)
        idx = np.searchsorted(texts, of[held])
        whole = np.where(cover[idx] >= MIN_SHARED, 1.0, 0.0)  # one text handed in by both: all it holds is shared
        residual = np.where(idx[:, None] == idx[None, :], whole[:, None], left[np.ix_(idx, idx)])
        explained[np.ix_(held, held)] = residual < threshold
    np.fill_diagonal(explained, False)
    return explained


def _compare_one(texts: dict[str, str], sources: dict[str, str], stub: str | None, stub_grams: set[str],
                 threshold: float) -> Compared:
    """_compare of the files as handed in: what each wrote is found here, in the process that compares them."""
    def written(files: dict[str, str]) -> dict[str, str]:
        return {who: similarity_input.written(t, stub) for who, t in files.items()}

    return _compare(written(texts), written(sources), stub_grams, _copydetect(), threshold)


def _compare_all(texts: dict[str, dict[str, str]], sources: dict[str, dict[str, str]], stubs: dict[str, str],
                 stub_grams: set[str], threshold: float) -> list[Compared]:
    """_compare for every piece: side by side in processes of their own for a large class (tokenizing is pure
    Python, so threads would not help), one after another for a small one, where starting costs more."""
    jobs = [(texts[m], sources[m], stubs.get(m), stub_grams, threshold) for m in MODULES]
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2 or max(len(job[0]) + len(job[1]) for job in jobs) < PARALLEL_FROM:
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
    ({label: {module: text}}: similarity_input.known(), the reference first), the stubs and what the class writes alike
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
    compared = dict(zip(MODULES, _compare_all(mine, {m: of(known, m) for m in MODULES}, stub_text, stub_grams,
                                                  threshold)))
    students = sorted(s for s, t in found.items() if t)
    findings = similarity_findings.find(compared, students, threshold)
    shown = _shown(findings, mine, stub_text, stub_grams, {m: c.common for m, c in compared.items()}, threshold, detector)
    method = similarity_page.Method(detector.version, NOISE, MIN_SHARED, COMMON_SHARE, COMMON_MIN)
    common_notes = [f"{m}.py: {c.note}" for m, c in compared.items() if c.note]
    page = similarity_page.page(findings, shown, {m: len(mine[m]) for m in MODULES}, len(students),
                                notes + (known_notes or []), threshold, method, common_notes, sorted(known))
    Path(out).write_text(page, encoding="utf-8")
    return findings
