"""`grade batch collect DEST --org ORG --prefix PREFIX [--roster FILE]`: the class's repositories, cloned with the
GitHub CLI's ordinary commands, into DEST/<repository>/, each with its whole history (`--before` reads it).

- With a roster, each student's repository is ORG/PREFIX+username (lowercased, as Classroom 50 names them);
  without one, `gh repo list ORG` names the repositories and those starting with PREFIX are taken (the template
  too, if its name starts with PREFIX: a roster is the class list, a prefix only a guess at it).
- Each is cloned with `gh repo clone ORG/REPO`, into a hidden folder first and renamed when whole, so an
  interrupted run never leaves a half clone that looks like a student's. A clone already in DEST is kept: a
  rerun clones only what is missing (delete a folder to clone it again).
- A student whose repository does not exist (never accepted, or a typo in the roster) is listed at the end, one
  line each, and the rest go on; so is a clone that failed for another reason, and then the exit code is 1.
- A clone over the cap (MAX_REPO_MB, or ATTNLAB_MAX_REPO_MB in the environment: its .git and checkout together) is
  removed and left as a placeholder folder holding only CUT, which says its size: one huge repository never makes
  the class too large to pack and copy to every shard. It is said in a line (`too large: ORG/REPO ...`) and not a
  failure; `grade batch` gives the student an error row naming the cap (refuse_cut), and grades the rest. To
  clone it after all, delete its folder and rerun with a larger cap.
- gh missing, not logged in, or ORG or PREFIX finding nothing at all: one line, nothing cloned.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from grader.regrade import roster as rosters
from grader.core.files import Refused, is_link

GH_SECONDS = 900  # one repository's clone (a lab repository's history is a few MB)
LIST_LIMIT = 10_000
REPOSITORY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")  # a name GitHub gives a repository, never a path
NOT_FOUND = ("Could not resolve to a Repository", "Repository not found", "HTTP 404")  # gh's and git's words
NOT_LOGGED_IN = 4  # gh's exit code where it needs a login
MAX_REPO_MB = 100  # one clone, .git and checkout: a lab repository's is a few MB (the datasets and the grader)
CAP_ENV = "ATTNLAB_MAX_REPO_MB"
CUT = ".attnlab-too-large.json"  # the only file of a placeholder left where a clone over the cap was


class GhError(Exception):
    """gh cannot collect the class at all; str() is the one line the command prints."""


@dataclass
class Outcome:
    """What a collect did: repositories (by name) cloned and kept, and (student, repository[, why]) not cloned."""

    students: int = 0
    cloned: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)
    cut: list[tuple[str, str, str]] = field(default_factory=list)  # cloned, over the cap, left as a placeholder
    failed: list[tuple[str, str, str]] = field(default_factory=list)


def _gh() -> str:
    path = shutil.which("gh")
    if path is None:
        raise GhError("the GitHub CLI (gh) is not on PATH: install it (https://cli.github.com), then `gh auth login`")
    return path


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GIT_TERMINAL_PROMPT": "0", "NO_COLOR": "1"}
    try:
        return subprocess.run([_gh(), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"gh {args[0]} {args[1]} took over {timeout:.0f} s")


def _last(done: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    return (lines[-1] if lines else f"exit code {done.returncode}")[:300]


def check_login() -> None:
    """gh is there and logged in (`gh auth status`: a login, or a token in GH_TOKEN)."""
    done = _run(["auth", "status"])
    if done.returncode:
        raise GhError(f"gh is not logged in to GitHub ({_last(done)}): run `gh auth login`, or set GH_TOKEN to a "
                      "token that can read the class's repositories")


def listed(org: str, prefix: str) -> list[str]:
    """The repositories of `org` whose name starts with `prefix` (case aside), by `gh repo list`."""
    done = _run(["repo", "list", org, "--limit", str(LIST_LIMIT), "--json", "name"])
    if done.returncode:
        raise GhError(f"gh repo list {org} failed: {_last(done)}")
    try:
        names = [item["name"] for item in json.loads(done.stdout)]
    except (ValueError, TypeError, KeyError):
        raise GhError(f"gh repo list {org} answered what is not a list of repositories") from None
    return sorted({n for n in names if isinstance(n, str) and REPOSITORY.fullmatch(n)
                   and n.lower().startswith(prefix.lower())})


def cap_bytes() -> int:
    """The cap on one clone: ATTNLAB_MAX_REPO_MB where it is a whole number of MB, else MAX_REPO_MB."""
    text = os.environ.get(CAP_ENV, "").strip()
    return (int(text) if text.isdigit() and int(text) > 0 else MAX_REPO_MB) << 20


def size_of(folder: Path, stop: int) -> int:
    """The bytes of the regular files under `folder` (links never followed), counted until they pass `stop`."""
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > stop:
                return total
    return total


def _cut_text(size: int, cap: int) -> str:
    return (f"not graded: its clone is {size / (1 << 20):.0f} MB, over the cap of {cap >> 20} MB a repository "
            f"({CAP_ENV}); grade it by hand, or delete its folder and collect again with a larger cap")


def placeholder(folder: Path) -> dict | None:
    """What a placeholder of a clone over the cap says (its size and the cap), or None if `folder` is none: a
    folder without .git holding CUT alone (a clone always has .git, so no repository's own files make one)."""
    try:
        if is_link(folder) or not folder.is_dir() or os.listdir(folder) != [CUT] or is_link(folder / CUT):
            return None
        with open(folder / CUT, encoding="utf-8") as f:
            said = json.loads(f.read(4096))
        return {"bytes": int(said["bytes"]), "cap": int(said["cap"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def refuse_cut(path: Path) -> None:
    """Raise Refused, naming the cap, where `path` is the placeholder of a repository left out for its size."""
    said = placeholder(path)
    if said is not None:
        raise Refused(_cut_text(said["bytes"], said["cap"]))


def clone(org: str, repo: str, dest: Path) -> tuple[str, str]:
    """("cloned" | "kept" | "cut" | "missing" | "failed", why) for ORG/REPO cloned into DEST/REPO."""
    target = dest / repo
    if os.path.lexists(target):
        said = placeholder(target)
        if said is not None:
            return "cut", _cut_text(said["bytes"], said["cap"])
        if not is_link(target) and (target / ".git").is_dir():
            return "kept", ""
        return "failed", f"{target} is there and is not a clone: move it away"
    partial = dest / f".{repo}.partial"  # hidden: grade batch never takes it for a student
    shutil.rmtree(partial, ignore_errors=True)
    done = _run(["repo", "clone", f"{org}/{repo}", str(partial)], GH_SECONDS)
    if done.returncode == 0 and (partial / ".git").is_dir():
        cap = cap_bytes()
        size = size_of(partial, cap)
        if size > cap:  # left out whole: a placeholder says so, and the student's row
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            (partial / CUT).write_text(json.dumps({"bytes": size, "cap": cap}) + "\n", encoding="utf-8")
            os.rename(partial, target)
            return "cut", _cut_text(size, cap)
        os.rename(partial, target)
        return "cloned", ""
    shutil.rmtree(partial, ignore_errors=True)
    if done.returncode == NOT_LOGGED_IN:
        raise GhError(f"gh is not logged in to GitHub ({_last(done)}): run `gh auth login`, or set GH_TOKEN")
    text = done.stderr + done.stdout
    return ("missing", "") if any(word in text for word in NOT_FOUND) else ("failed", _last(done))


def main(*, dest: Path, org: str, prefix: str, roster: rosters.Roster | None = None, jobs: int = 4,
         say: Callable[[str], None] = lambda line: None) -> Outcome:
    """Clone the class into `dest`; `say` gets a line as each repository is done."""
    rosters.check_org(org)
    rosters.check_prefix(prefix)
    if os.path.lexists(dest) and (is_link(dest) or not dest.is_dir()):
        raise GhError(f"{dest} is not a folder: give the folder the class is cloned into")
    check_login()
    if roster is not None:
        wanted = [(e.username, rosters.repository(prefix, e.username)) for e in roster.students]
    else:
        repos = listed(org, prefix)
        if not repos:
            raise GhError(f"no repository of {org} starts with {prefix!r}: check --org and --prefix (gh repo list "
                          f"{org} lists what the token can read)")
        wanted = [(repo[len(prefix):] or repo, repo) for repo in repos]
    dest.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(students=len(wanted))

    def one(item: tuple[str, str]) -> tuple[str, str, str, str]:
        student, repo = item
        how, why = clone(org, repo, dest)
        if how in ("cloned", "kept"):
            say(f"{how}: {org}/{repo}")
        elif how == "cut":
            say(f"too large: {student} ({org}/{repo}): {why}")
        return student, repo, how, why

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for student, repo, how, why in pool.map(one, wanted):
            if how == "cloned":
                outcome.cloned.append(repo)
            elif how == "kept":
                outcome.kept.append(repo)
            elif how == "cut":
                outcome.cut.append((student, repo, why))
            elif how == "missing":
                outcome.missing.append((student, repo))
            else:
                outcome.failed.append((student, repo, why))
    if roster is not None and not outcome.cloned and not outcome.kept and not outcome.failed and not outcome.cut:
        raise GhError(f"none of the roster's {len(wanted)} students has a repository {org}/{prefix}<username>: "
                      "check --org and --prefix")
    return outcome
