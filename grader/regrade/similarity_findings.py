"""What the similarity report found, in the order an instructor reads it (grader.regrade.similarity compares).

Three kinds of finding, each piece apart:
- a student whose piece matches a known source (identical, or their own share found in it at or above the
  threshold) is that source's: grouped by piece and source, "5 students hand in the reference's additive.py";
  two such students are a pair still where they share code beyond the source (grader.regrade.similarity);
- three or more students matching no known source, each identical to another of them or alike both ways (each at
  least NEAR found in the other: a file that merely holds another's is no likeness), are one group, not every pair;
- a pair of students is listed for the pieces neither explains, highest first. These come first on the page: a
  copy between two students that matches no known source is what the report is for.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from grader.core.pieces import MODULES

NEAR = 0.9  # a score at or above this joins a group as being identical does
GROUP_FROM = 3  # students handing in one piece alike, from which they are a group and not pairs


@dataclass
class Compared:
    """One piece compared (grader.regrade.similarity): every student with every other, and with the known sources."""

    students: list[str]
    sources: list[str]
    scores: np.ndarray  # (n, n) each pair's score, 1 where identical
    same: np.ndarray  # (n, n) identical once comments and layout are left out
    close: np.ndarray  # (n, n) identical, or each at least NEAR found in the other
    match: list[tuple[int, float, bool] | None]  # each student's known source: (index, score, identical)
    explained: np.ndarray  # (n, n) both match one source and share nothing beyond it
    common: list[str]  # the k-grams left out as the assignment's
    note: str  # on short code many hand in alike


@dataclass
class Findings:
    """Pairs ({a, b, score, pieces: {module: score}, identical: [module], explained: {module: source},
    grouped: [module]}, what no known source or group explains first), groups of students ({piece, students,
    identical, score}) and known sources' matches ({piece, source, students: {name: score}, identical: [name]})."""

    pairs: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)

    def summary(self) -> list[str]:
        """A line for each known source's match and each group, largest first, for the class report."""
        lines = [f"{len(s['students'])} student(s) hand in {s['source']}'s {s['piece']}.py: "
                 + ", ".join(s["students"]) for s in self.sources]
        lines += [f"{len(g['students'])} students hand in one {g['piece']}.py"
                  f"{' identically' if g['identical'] else ''}: " + ", ".join(g["students"]) for g in self.groups]
        return lines


def _matches(c: Compared) -> dict[str, tuple[str, float, bool]]:
    """{student: (source, score, identical)} of the students whose piece matches a known source."""
    return {s: (c.sources[m[0]], m[1], m[2]) for s, m in zip(c.students, c.match) if m}


def _groups(c: Compared, matched: dict[str, tuple]) -> list[list[int]]:
    """The groups of GROUP_FROM or more students matching no known source, by identical or NEAR pieces."""
    free = [i for i, s in enumerate(c.students) if s not in matched]
    parent = {i: i for i in free}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in zip(*np.nonzero(np.triu(c.close, 1))):
        if a in parent and b in parent:
            parent[root(int(a))] = root(int(b))
    members: dict[int, list[int]] = {}
    for i in free:
        members.setdefault(root(i), []).append(i)
    return [sorted(g) for g in members.values() if len(g) >= GROUP_FROM]


def find(compared: dict[str, Compared], students: list[str], threshold: float) -> Findings:
    """The findings over every piece's comparison; `students`: every student with a piece, in order."""
    where = {s: i for i, s in enumerate(students)}
    best = np.zeros((len(students), len(students)))
    matched: dict[str, dict[str, tuple[str, float, bool]]] = {}
    group_of: dict[str, dict[str, int]] = {}
    findings = Findings()
    for m, c in compared.items():
        rows = np.array([where[s] for s in c.students], dtype=int)
        best[np.ix_(rows, rows)] = np.maximum(best[np.ix_(rows, rows)], c.scores)
        matched[m] = _matches(c)
        by_source: dict[str, dict[str, tuple[float, bool]]] = {}
        for s, (source, score, same) in matched[m].items():
            by_source.setdefault(source, {})[s] = (score, same)
        findings.sources += [{"piece": m, "source": source, "students": {s: v[0] for s, v in held.items()},
                              "identical": [s for s, v in held.items() if v[1]]} for source, held in by_source.items()]
        group_of[m] = {}
        for n, g in enumerate(_groups(c, matched[m])):
            at = np.ix_(g, g)
            group_of[m].update((c.students[i], n) for i in g)
            off = ~np.eye(len(g), dtype=bool)
            findings.groups.append({"piece": m, "students": [c.students[i] for i in g],
                                    "identical": bool(c.same[at][off].all()), "score": float(c.scores[at][off].min())})
    findings.sources.sort(key=lambda s: (-len(s["students"]), MODULES.index(s["piece"]), s["source"]))
    findings.groups.sort(key=lambda g: (-len(g["students"]), MODULES.index(g["piece"]), g["students"]))
    per = {m: ({s: i for i, s in enumerate(c.students)}, c) for m, c in compared.items()}
    ranked = []
    for i, j in zip(*np.nonzero(np.triu(best >= threshold, 1))):
        a, b = students[i], students[j]
        found = {m: float(c.scores[at[a], at[b]]) for m, (at, c) in per.items() if a in at and b in at}
        if not found:  # two students with no piece in common share nothing
            continue
        explained = {m: matched[m][a][0] for m in found if per[m][1].explained[per[m][0][a], per[m][0][b]]}
        grouped = [m for m in found if m not in explained and group_of[m].get(a, -1) == group_of[m].get(b, -2)]
        alone = [s for m, s in found.items() if s >= threshold and m not in explained and m not in grouped]
        if alone:
            ranked.append((-max(alone), {"a": a, "b": b, "score": max(found.values()), "pieces": found,
                                         "identical": [m for m in MODULES if m in found and per[m][1].same[
                                             per[m][0][a], per[m][0][b]]],
                                         "explained": explained, "grouped": grouped}))
    ranked.sort(key=lambda r: (r[0], -r[1]["score"], r[1]["a"], r[1]["b"]))
    findings.pairs = [p for _, p in ranked]
    return findings
