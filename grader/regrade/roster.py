"""The class as a roster: who is graded, and which repository is each student's.

GitHub Classroom was retired on 2026-08-28 (its API answers 410 Gone). A course now hands out a template
repository with Classroom 50 (foundation50/classroom50) or by itself, and knows its class from a roster:

- Classroom 50's roster.csv: `username,first_name,last_name,email,section,github_id,role`; only students are
  graded (`role` student, or empty), teachers and assistants are left out;
- or a plain list of GitHub usernames, one a line, `#` starting a comment.

The repository of user U is `PREFIX + U`, lowercased (Classroom 50 names them `<classroom>-<assignment>-<user>`,
so PREFIX is `<classroom>-<assignment>-`). With a roster the roster is the class list: every student on it has a
row (one without a repository an error row saying which repository was expected), the shards are dealt from it,
and a repository that is not on it is left out and named in one line.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

MAX_ROSTER = 16 << 20  # bytes: a roster of 100,000 students is a few MB
COLUMNS = ("username", "first_name", "last_name", "email", "section", "github_id", "role")
DETAILS = ("first_name", "last_name", "email", "section")  # what the Classroom 50 scores.csv repeats
# a GitHub login (letters, digits, inner hyphens; Enterprise managed users add _shortcode), as a repository name
# takes it: never a path, never a spreadsheet formula
USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
PREFIX = re.compile(r"(?![.])[A-Za-z0-9._-]{0,100}")  # never a hidden folder's name: grade batch skips those
ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
SHOWN = 20  # names shown in one line before "and N more"


class RosterError(ValueError):
    """A roster that cannot be read, or a prefix or organization that names no repository; str() is one line."""


@dataclass(frozen=True)
class Entry:
    """One student of the roster: the username and, from a roster.csv, what else it says of them."""

    username: str
    line: int  # where the roster names them (1-based)
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    section: str = ""

    def details(self) -> dict[str, str]:
        return {"username": self.username, **{k: getattr(self, k) for k in DETAILS}}


@dataclass(frozen=True)
class Roster:
    """The students of a roster, in its order, and how many of its rows were not students (teachers)."""

    path: Path
    students: tuple[Entry, ...]
    others: int = 0


def check_prefix(prefix: str) -> str:
    if not PREFIX.fullmatch(prefix):
        raise RosterError(f"--prefix {prefix!r} is not the start of a repository name: letters, digits, '.', '_' "
                          "and '-' only, not starting with '.', e.g. fall26-attention-lab-")
    return prefix


def check_org(org: str) -> str:
    if not ORG.fullmatch(org):
        raise RosterError(f"--org {org!r} is not a GitHub organization's or user's name (letters, digits and '-')")
    return org


def repository(prefix: str, username: str) -> str:
    """The name of `username`'s repository: PREFIX + username, lowercased, as Classroom 50 names them."""
    return (prefix + username).lower()


def _check_user(name: str, where: str) -> str:
    if not USERNAME.fullmatch(name):
        raise RosterError(f"{where}: {name[:60]!r} is not a GitHub username (letters, digits, '-', '_' and '.', "
                          "starting with a letter or digit)")
    return name


def _text(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_ROSTER + 1)
    except OSError as e:
        raise RosterError(f"{path} cannot be read ({e.strerror})") from None
    if len(data) > MAX_ROSTER:
        raise RosterError(f"{path} is over {MAX_ROSTER >> 20} MB: not a roster")
    try:
        return data.decode("utf-8-sig")  # a spreadsheet's export may start with a byte-order mark
    except UnicodeDecodeError:
        raise RosterError(f"{path} is not UTF-8 text: export the roster as CSV (UTF-8)") from None


def _is_csv(text: str) -> bool:
    first = next((line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")
    return "," in first and "username" in [c.strip().lower() for c in first.split(",")]


def _from_csv(path: Path, text: str) -> tuple[list[Entry], int]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = [(f or "").strip().lower() for f in reader.fieldnames or []]
    reader.fieldnames = fields
    entries, others = [], 0
    for row in reader:
        where = f"{path}, line {reader.line_num}"
        cells = {k: (v or "").strip() if isinstance(v, str) else "" for k, v in row.items() if k}
        if not any(cells.values()):
            continue
        role = cells.get("role", "").lower()
        if role not in ("", "student", "students"):
            others += 1  # a teacher, an assistant: not graded
            continue
        entries.append(Entry(_check_user(cells.get("username", ""), where), reader.line_num,
                             **{k: cells.get(k, "") for k in DETAILS}))
    return entries, others


def _from_list(path: Path, text: str) -> list[Entry]:
    entries = []
    for i, line in enumerate(text.splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if name.lower() == "username" and not entries:  # a one-column CSV's header
            continue
        if name:
            entries.append(Entry(_check_user(name.removeprefix("@"), f"{path}, line {i}"), i))
    return entries


def read(path: Path) -> Roster:
    """The roster at `path`: Classroom 50's roster.csv (a CSV whose header names `username`) or a list of usernames.
    Refuses, in one line, a file that is not one, a name that is no GitHub username, a student named twice."""
    text = _text(path)
    entries, others = _from_csv(path, text) if _is_csv(text) else (_from_list(path, text), 0)
    seen: dict[str, Entry] = {}
    for e in entries:
        key = e.username.lower()  # GitHub's logins ignore case: Alice and alice are one account
        if key in seen:
            raise RosterError(f"{path}: {e.username} is on the roster twice (lines {seen[key].line} and {e.line}): "
                              "keep one")
        seen[key] = e
    if not entries:
        raise RosterError(f"{path} names no student: give Classroom 50's roster.csv or one GitHub username a line")
    return Roster(path, tuple(entries), others)


def shown(names: list[str]) -> str:
    """Names for one line: the first SHOWN of them, and how many more."""
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


@dataclass
class Match:
    """The class's folders read against the roster: each student's, the students with none, the rest."""

    found: dict[str, list[Path]]  # student name -> the folders named after their repository (one, or two: an error)
    expected: dict[str, str]  # student name -> the repository's name
    others: list[Path]  # folders that are no roster student's repository

    @property
    def missing(self) -> list[str]:
        return [name for name in self.expected if name not in self.found]


def match(roster: Roster, prefix: str, paths: list[Path], name_of, slug) -> Match:
    """Which of `paths` is whose: a path whose name (`name_of(path)`, the folder's or file's) is, case aside, a
    roster student's repository is theirs. Student names are the roster's usernames, made file-safe by `slug`
    (classlist.slug, which leaves a GitHub username as it is but for Windows' reserved names)."""
    expected = {slug(e.username): repository(prefix, e.username) for e in roster.students}
    owner = {repo: name for name, repo in expected.items()}
    found: dict[str, list[Path]] = {}
    others: list[Path] = []
    for path in paths:
        name = owner.get(name_of(path).lower())
        if name is None:
            others.append(path)
        else:
            found.setdefault(name, []).append(path)
    return Match(found, expected, others)


def class_digest(names: list[str], prefix: str) -> str:
    """A roster class list's identity: its students and the prefix that names their repositories (two runs with
    another prefix grade other repositories: their parts never merge, and a rerun does not resume the other)."""
    text = "".join(f"{s}\n" for s in sorted(set(names))) + f"\0prefix {prefix}\n"
    return hashlib.sha256(text.encode()).hexdigest()
