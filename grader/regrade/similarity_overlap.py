"""How much of each text the similarity report finds in every other, counted for all pairs at once.

copydetect compares one pair at a time (compare_files): the characters of each file that lie in a k-gram the other
holds too, over the characters in any k-gram counted at all. These are the same numbers for every pair of a piece in
one pass: only texts that share a k-gram are looked at, and each text once, so a class of 1,000 costs seconds
where one comparison a pair cost a minute. tests/regrade/test_similarity_scores.py holds them to copydetect's.
"""
from __future__ import annotations

import numpy as np

NOISE = 25  # copydetect's k: the shortest run of normalised characters that counts as shared
# fewer shared normalised characters than this score a piece 0: the encoder's obvious three lines (about 40) or
# the one-line context are the same for anyone who writes them the natural way, and would flag half the class
MIN_SHARED = 2 * NOISE
CHUNK = 64  # other texts marked at once against one: bounds the memory a long file costs (CHUNK x its length)


def overlaps(filtered: list[str], skipped: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """(overlap, cover) of the normalised texts `filtered`, the `skipped` k-grams left out: overlap[p, q] is how many
    characters of p lie in a k-gram it shares with q (copydetect's token overlap, compare_files' first count);
    cover[p] how many lie in any k-gram counted (its token coverage, the shares' denominator)."""
    vocab: dict[str, int] = {}
    at = []  # each text's k-grams by position, as ids; -1 where skipped
    for f in filtered:
        grams = (f[i:i + NOISE] for i in range(len(f) - NOISE + 1))
        at.append(np.array([-1 if g in skipped else vocab.setdefault(g, len(vocab)) for g in grams], dtype=np.int64))
    # which texts hold each k-gram: a CSR table, holders of gram u in flat[start[u]:start[u + 1]]
    held = [np.unique(a[a >= 0]) for a in at]
    grams_of = np.concatenate(held) if held else np.zeros(0, dtype=np.int64)
    texts_of = np.repeat(np.arange(len(at)), [len(h) for h in held])
    flat = texts_of[np.lexsort((texts_of, grams_of))]
    start = np.concatenate(([0], np.cumsum(np.bincount(grams_of, minlength=len(vocab)))))
    overlap = np.zeros((len(at), len(at)), dtype=np.int64)
    for p, a in enumerate(at):
        pos = np.nonzero(a >= 0)[0]
        if not pos.size:
            continue
        first, count = start[a[pos]], start[a[pos] + 1] - start[a[pos]]
        # every (holder, position) of p's k-grams, gathered without a Python loop over them
        gather = np.repeat(first - np.cumsum(count) + count, count) + np.arange(count.sum())
        holders, cols = flat[gather], np.repeat(pos, count) + 1
        others = np.unique(holders)  # p among them: what it shares with itself is its cover
        c = np.arange(len(filtered[p]))
        # character c lies in a shared k-gram starting anywhere from c - NOISE + 1 to c
        lo, hi = np.clip(c - NOISE + 1, 0, len(a)), np.minimum(c, len(a) - 1) + 1
        for chunk in range(0, len(others), CHUNK):
            part = others[chunk:chunk + CHUNK]
            keep = (holders >= part[0]) & (holders <= part[-1])
            marks = np.zeros((len(part), len(a) + 1), dtype=np.int32)
            marks[np.searchsorted(part, holders[keep]), cols[keep]] = 1
            runs = marks.cumsum(axis=1)  # runs[:, i]: the k-grams shared before position i
            overlap[p, part] = ((runs[:, hi] - runs[:, lo]) > 0).sum(axis=1)
    cover = np.diagonal(overlap).astype(float)
    np.fill_diagonal(overlap, 0)
    return overlap, cover


def scored(overlap: np.ndarray, cover: np.ndarray, near: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, close, share) of every pair of texts. share[p, q]: p's share found in q. A pair's score is the larger
    share, rounded to 4 places, where both hold at least MIN_SHARED shared characters (copydetect's compare_files
    holds the first file to that floor alone, so its score hung on which name sorts first), else 0; close: both
    shares at least `near`, alike both ways and not one file holding the other."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip(np.nan_to_num(overlap / cover[:, None]), 0.0, 1.0)
    floor = np.minimum(overlap, overlap.T) >= MIN_SHARED
    scores = np.where(floor, np.round(np.maximum(share, share.T), 4), 0.0)
    return scores, floor & (np.minimum(share, share.T) >= near), np.where(floor, share, 0.0)
