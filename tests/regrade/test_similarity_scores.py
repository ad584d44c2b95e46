"""The similarity report's scores, counted for every pair at once, are copydetect's compare_files pair by pair.

grader.regrade.similarity_overlap counts the characters two texts share in k-grams for the whole class in one pass
(only texts that share a k-gram are looked at), where copydetect compares one pair at a time; on a made-up class of
forty, mutated at random from the tests' solutions as bench/regrade.py makes its class of 1,000, some handing in
the same file, every pair's score must be the one copydetect gives, its floor asked of both files (copydetect asks
it of the first alone, so a score hung on which name sorts first).
"""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

from grader.core.pieces import MODULES
from grader.regrade import similarity, similarity_input

from .test_similarity import CAROL, DAVE, as_alice, as_bob, stub

pytest.importorskip("copydetect")


def made_up_class(students: int, seed: int) -> dict[str, dict[str, str]]:
    rng = random.Random(seed)
    pools = {m: [as_alice(m), as_bob(m), CAROL[m]] + ([DAVE[m]] if m in DAVE else []) for m in MODULES}

    def mutate(text: str) -> str:
        out = []
        for line in text.splitlines():
            r = rng.random()
            if r < 0.1:
                continue
            if r < 0.25:
                out.append(f"{line[: len(line) - len(line.lstrip())]}v{rng.randint(0, 9)} = x.sum({rng.randint(0, 2)})")
            out.append(re.sub(r"\b(keys|query|scores|alpha|state|h|c)\b", lambda m: m.group(0) + rng.choice("_2"),
                              line) if rng.random() < 0.3 else line)
        return "\n".join(out) + "\n"

    made = {f"s{i:02d}": {m: mutate(rng.choice(pools[m])) for m in MODULES} for i in range(students)}
    for i in range(0, students, 7):  # the same file handed in twice, by students far apart in name order
        made[f"s{students - 1 - i:02d}"] = made[f"s{i:02d}"]
    return made


@pytest.mark.parametrize("seed", [0, 1])
def test_every_pairs_score_is_copydetects(seed):
    detector = similarity._copydetect()
    stubs = {m: stub(m) for m in MODULES}
    stub_grams = similarity._stub_grams([stubs[m] for m in sorted(stubs)], detector)
    found = made_up_class(40, seed)
    checked = 0
    for m in MODULES:
        texts = {s: similarity_input.written(t[m], stubs[m]) for s, t in found.items()}
        got = similarity._compare(texts, {}, stub_grams, detector, 0.5)
        skip = {hash(g) for g in stub_grams.union(got.common)}
        prints = [similarity._ignore(similarity._prints(texts[s], detector), skip, detector) for s in got.students]
        for i in range(len(prints)):
            for j in range(i + 1, len(prints)):
                if got.same[i, j]:
                    continue  # identical: 1 whatever the runs say
                shared, (si, sj), _ = detector.compare_files(prints[i], prints[j])
                back, _, _ = detector.compare_files(prints[j], prints[i])
                want = round(min(max(si, sj, 0.0), 1.0), 4) if min(shared, back) >= similarity.MIN_SHARED else 0.0
                assert got.scores[i, j] == got.scores[j, i] == want, (m, got.students[i], got.students[j])
                checked += want > 0
    assert checked > 100  # the class shares enough for the comparison to mean something
    assert np.isfinite(got.scores).all()
