"""`grade batch --before DATETIME`: each repository graded at its last commit made before the deadline.

The repository is untrusted, so git never runs in it: it is cloned (`--no-local`, the way git reads a
repository it does not trust: no hooks, no configuration of the repository's own) into a private folder,
with no system or user configuration either (no filters, no credential helpers), and the commit is checked
out there. What the clone holds is then read as any submission folder is (grader/verbs/intake.py).

A commit's time is what the student's machine wrote into it: a student can backdate a commit. The
deadline is a cut on those times, not on when a push reached GitHub (see docs/threat-model.md).
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader.verbs.intake import Refused, is_link

GIT_SECONDS = 120  # one repository's clone and checkout


@dataclass(frozen=True)
class Commit:
    sha: str
    time: str  # ISO 8601, UTC
    late: int  # commits reachable from HEAD made at or after the deadline: not graded


def parse(text: str) -> datetime:
    """An ISO 8601 time with its zone (`2026-12-01T23:59:00-05:00`, `...Z`); a naive one is refused, since the
    same deadline must cut at the same instant on every machine."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time, e.g. 2026-12-01T23:59:00-05:00") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{text!r} has no time zone: write it with one, e.g. {text.strip()}Z (UTC) or "
                         f"{text.strip()}-05:00")
    return when


def iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and not k.startswith("ATTNLAB_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", HOME=str(home),
               GIT_ATTR_NOSYSTEM="1", LC_ALL="C")
    return env


def _git(args: list[str], env: dict[str, str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", "-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null", *args],
                              capture_output=True, text=True, env=env, cwd=cwd, timeout=GIT_SECONDS,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise Refused("--before needs git, which is not on this machine's PATH") from None
    except subprocess.TimeoutExpired:
        raise Refused(f"git took over {GIT_SECONDS} s on this repository") from None
    if done.returncode:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise Refused(f"git cannot read this repository ({why[:200]})")
    return done.stdout


def checkout(repo: Path, before: datetime, into: Path) -> tuple[Path, Commit]:
    """The repository as it was at its last commit before `before`, checked out under `into` (created)."""
    git_dir = repo / ".git"
    if is_link(repo) or is_link(git_dir) or not git_dir.is_dir():
        raise Refused("is not a git repository (no .git folder): --before grades each repository at a commit; "
                      "give the folder `gh classroom clone student-repos` writes, or leave out --before")
    into.mkdir(parents=True)
    env, clone = _env(into), into / "clone"
    _git(["clone", "--quiet", "--no-local", "--no-checkout", "--", str(Path(os.path.abspath(repo))), str(clone)],
         env, into)
    log = _git(["log", "--format=%H %ct", "HEAD", "--"], env, clone) if (clone / ".git").is_dir() else ""
    commits = [(sha, int(t)) for sha, t in (line.split() for line in log.splitlines() if line.strip())]
    if not commits:
        raise Refused("has no commits")
    cut = before.timestamp()
    on_time = [(t, -i, sha) for i, (sha, t) in enumerate(commits) if t < cut]
    late = len(commits) - len(on_time)
    if not on_time:
        first = iso(datetime.fromtimestamp(min(t for _, t in commits), timezone.utc))
        raise Refused(f"late: no commit before the deadline {iso(before)} (the first is from {first}); "
                      f"{late} commit(s) not graded")
    t, _, sha = max(on_time)  # the latest on time; of equal times, the first git lists
    _git(["checkout", "--quiet", "--detach", sha], env, clone)
    return clone, Commit(sha, iso(datetime.fromtimestamp(t, timezone.utc)), late)
