"""Which submissions make the class, and the name of each: `grade batch`'s class list.

Without a roster the class is what is given: each path a submission, or a folder of them (the folder
`grade batch collect` or `gh teacher download` writes, or `<assignment>-submissions/` of the retired GitHub
Classroom's clone), each named after its repository. With a roster (grader/regrade/roster.py) the class is the
roster's students, named by username, each graded from the folder named after their repository.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.regrade import roster as rosters
from grader.regrade.shard import Shard, class_digest, members
from grader.core.files import LAB_FILES, NOTEBOOK, is_link

EXERCISES = "exercises"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}


def holds_lab(folder: Path) -> bool:
    """A folder laid out like exercises/ (a lab file or the notebook, even a broken one or a link)."""
    return any(os.path.lexists(folder / name) for name in LAB_FILES)


def is_submission(path: Path) -> bool:
    """A .zip, a .ipynb, a folder laid out like exercises/ or a repository holding exercises/."""
    if not path.is_dir() or is_link(path):
        return True  # a file or a link is one submission (a link becomes an error row, never followed)
    return holds_lab(path) or os.path.lexists(path / EXERCISES)


def collect(paths: list[Path]) -> list[Path]:
    """The submissions given: each path is one; but where none of them is a submission or a git repository
    (the folder `grade batch collect` or `gh teacher download` writes, or one per section), each stands for its
    entries: folders, .zip and .ipynb files, one level, never deeper (so a download's scores.csv is none). The
    same path twice is graded once."""
    found: dict[str, Path] = {}
    # Only when no path given is a submission itself: a student's own folder given among others is one
    # row (an error row if it holds nothing), never a source of rows named after folders of its choosing.
    folders = not any(is_submission(p) or os.path.lexists(p / ".git") for p in paths)
    for path in paths:
        entries = [path]
        if folders:
            inner = sorted(p for p in path.iterdir() if not p.name.startswith(".")
                           and (p.is_dir() or p.suffix in (".zip", ".ipynb") or is_link(p)))
            entries = inner or [path]
        for p in entries:
            found.setdefault(os.path.normcase(os.path.abspath(p)), p)
    return list(found.values())


def base_name(path: Path) -> str:
    """The student a path stands for: the repository's folder for `repo/exercises` and `repo/exercises/lesson.ipynb`,
    a file's stem, else the folder's name."""
    parts = Path(os.path.abspath(path)).parts
    last = len(parts) - 1
    if parts[last] == NOTEBOOK and last > 0:
        last -= 1
    while last > 0 and parts[last] == EXERCISES:
        last -= 1
    name = parts[last]
    return name[: -len(Path(name).suffix)] if last == len(parts) - 1 and Path(name).suffix in (".zip", ".ipynb") else name


def slug(name: str) -> str:
    """A name safe as a file name everywhere and as a spreadsheet cell: [A-Za-z0-9._-], never leading . or -."""
    s = _UNSAFE.sub("_", name)[:80]
    s = re.sub(r"^[.-]", "_", s) or "student"
    return "_" + s if s.split(".")[0].upper() in _WINDOWS_RESERVED else s


def student_names(paths: list[Path]) -> dict[Path, str]:
    """A unique name per submission, the same for the same set of paths in any order: its slug, or where
    slugs collide (case aside: report files share a folder), the slug and -2, -3, ... in the order of paths."""
    slugs = {p: slug(base_name(p)) for p in paths}
    count: dict[str, int] = {}
    for s in slugs.values():
        count[s.lower()] = count.get(s.lower(), 0) + 1
    used = {s.lower() for s in slugs.values() if count[s.lower()] == 1}
    names = {p: s for p, s in slugs.items() if count[s.lower()] == 1}
    for p in sorted((p for p in paths if p not in names), key=lambda p: (os.path.abspath(p), str(p))):
        name, n = slugs[p], 1
        while name.lower() in used:
            n += 1
            name = f"{slugs[p]}-{n}"
        used.add(name.lower())
        names[p] = name
    return names


@dataclass
class ClassList:
    """Who is graded, named how: the submissions found, or a roster's students and their repositories."""

    paths: list[Path]  # the submissions to grade, each named in `names`
    names: dict[Path, str]
    everyone: list[str]  # the class list the shards are dealt from
    digest: str
    missing: dict[str, str] = field(default_factory=dict)  # a roster student without one repository -> why
    roster: dict[str, dict] | None = None  # student -> the roster's details and order
    said: list[str] = field(default_factory=list)  # lines for the instructor, besides those of `missing`

    @property
    def notes(self) -> list[str]:
        """The lines for the instructor: a shard's name only its own students without a repository."""
        if not self.missing:
            return self.said
        named = rosters.shown(sorted(self.missing))
        return [*self.said, f"no repository: {len(self.missing)} roster student(s) get an error row ({named})"]

    def part(self, shard: Shard | None) -> ClassList:
        if shard is None:
            return self
        keep = set(members(self.everyone, shard))
        return ClassList([p for p in self.paths if self.names[p] in keep], self.names, self.everyone, self.digest,
                         {n: why for n, why in self.missing.items() if n in keep},
                         None if self.roster is None else {n: d for n, d in self.roster.items() if n in keep},
                         self.said)


def class_list(submissions: list[Path], roster: rosters.Roster | None = None, prefix: str = "") -> ClassList:
    """The class: every submission found, named after its repository; or, with a roster, the roster's students,
    each named by username and graded from the folder named PREFIX + username (case aside): a student with no such
    folder gets an error row, and a folder of no student's is left out (said in one line)."""
    paths = collect(list(submissions))
    if roster is None:
        names = student_names(paths)
        return ClassList(paths, names, list(names.values()), class_digest(list(names.values())))
    m = rosters.match(roster, prefix, paths, base_name, slug)
    names = {found[0]: name for name, found in m.found.items() if len(found) == 1}
    missing = {name: f"no repository (expected {repo})" for name, repo in m.expected.items() if name not in m.found}
    missing.update({name: f"{len(found)} folders are {m.expected[name]}'s repository ({', '.join(map(str, found))}): "
                          "give one" for name, found in m.found.items() if len(found) > 1})
    said = []
    if m.others:
        said.append(f"not on the roster, left out: {len(m.others)} ({rosters.shown(sorted(p.name for p in m.others))})")
    everyone = list(m.expected)
    details = {slug(e.username): {**e.details(), "order": i} for i, e in enumerate(roster.students)}
    return ClassList([p for p in paths if p in names], names, everyone, rosters.class_digest(everyone, prefix),
                     missing, details, said)
