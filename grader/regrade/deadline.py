"""`grade batch --before DATETIME`: each repository graded at its last commit made before the deadline.

The repository is untrusted, so git never runs in it. What a clone reads of its .git (HEAD, refs, objects) is
first copied into a private folder as plain files only, never through a link: nothing of the student's can
point git elsewhere (a `commondir`, `objects/info/alternates`, a link inside .git, a `.git` that is no git
folder, so that git looks for one beside it), and no configuration, hook or include of theirs is read even by
the upload-pack a clone runs in the source. That copy is cloned (`--no-local`) with no system or user
configuration either (no filters, no credential helpers); the commit's tree is counted before it is checked out
(a pack of a few kB can name one blob a thousand times, or trees inside trees), and then checked out there.
What the clone holds is read as any submission folder is (grader/regrade/intake.py).

A commit's time is what the student's machine wrote into it: a student can backdate a commit. The
deadline is a cut on those times, not on when a push reached GitHub (see docs/threat-model.md). The cut compares
instants; every time the rows and reports show (the commit's, the deadline's) is written in the zone the deadline
was given in, so an instructor who wrote -05:00 reads -05:00 times beside it (a deadline in UTC: Z).
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader.core.files import READ_FLAGS, Refused, is_link

GIT_SECONDS = 120  # one repository's clone and checkout
# a lab repository's .git is a few MB and its checkout less: these are far above any honest one (GitHub takes
# no file over 100 MB) and far below what would fill the instructor's disk, every student's clone at once
MAX_GIT_BYTES = 512 << 20  # the .git files a clone reads, copied
MAX_GIT_ENTRIES = 200_000  # files and folders under them (a folder handed in may hold loose objects)
MAX_CHECKOUT_BYTES = 512 << 20  # what checking the commit out writes
MAX_CHECKOUT_FILES = 20_000  # files it writes (release_files walks 20 000 entries at most)
MAX_CHECKOUT_DEPTH = 100  # folders inside folders (or a ref's name): Python's recursive rmtree fails near 1000
READ = ("HEAD", "packed-refs", "shallow", "refs", "objects")  # what a clone reads of its source
ELSEWHERE = ("commondir", "objects/info/alternates", "objects/info/http-alternates")  # git reads on from there
# no configuration of any repository can name a hook, and git reads any owner's copy (ours, made by us)
GIT = ["git", "-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null"]


@dataclass(frozen=True)
class Commit:
    sha: str
    time: str  # ISO 8601, in the deadline's zone
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


def iso(when: datetime, zone: datetime | None = None) -> str:
    """`when` written in `zone`'s offset (default: its own), UTC as Z; the instant is the same either way."""
    target = (zone or when).tzinfo or timezone.utc
    text = when.astimezone(target).isoformat()
    return text[:-6] + "Z" if text.endswith(("+00:00", "-00:00")) else text


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and not k.startswith("ATTNLAB_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", HOME=str(home),
               GIT_ATTR_NOSYSTEM="1", LC_ALL="C")
    return env


def _copy_git(git_dir: Path, into: Path) -> Path:
    """What a clone reads of `git_dir` (HEAD, refs, objects), copied into `into` (created) as plain files only."""
    for name in ELSEWHERE:
        if os.path.lexists(git_dir / name):
            raise Refused(f".git/{name} points git at another repository: hand in the repository itself")
    into.mkdir()
    todo, total, entries = [name for name in READ if os.path.lexists(git_dir / name)], 0, 0
    while todo:
        rel = todo.pop()
        src, dst = git_dir / rel, into / rel
        entries += 1
        if entries > MAX_GIT_ENTRIES:
            raise Refused(f".git holds over {MAX_GIT_ENTRIES} files: pack it (git gc) and hand it in again")
        if rel.count("/") >= MAX_CHECKOUT_DEPTH:
            raise Refused(f".git holds folders over {MAX_CHECKOUT_DEPTH} deep")
        try:
            info = os.lstat(src)
            if stat.S_ISDIR(info.st_mode):
                dst.mkdir()
                todo += [f"{rel}/{name}" for name in sorted(os.listdir(src), reverse=True)]
                continue
            if not stat.S_ISREG(info.st_mode):  # a link (into another repository), a FIFO (git would block)
                raise Refused(f".git/{rel} is a symbolic link or not a regular file: git reads only plain files "
                              "of the repository's own")
            fd = os.open(src, READ_FLAGS)
        except OSError as e:
            raise Refused(f".git/{rel} cannot be read ({e.strerror})") from None
        with os.fdopen(fd, "rb") as f, open(dst, "wb") as out:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise Refused(f".git/{rel} is not a regular file")
            while chunk := f.read(1 << 20):
                total += len(chunk)
                if total > MAX_GIT_BYTES:
                    raise Refused(f".git is over {MAX_GIT_BYTES >> 20} MB; a lab repository's is a few MB")
                out.write(chunk)
    for name in ("HEAD", "packed-refs"):  # a ref named a/a/.../a would be a folder that deep in the clone
        if (into / name).is_file() and any(word.count(b"/") >= MAX_CHECKOUT_DEPTH
                                           for word in (into / name).read_bytes().split()):
            raise Refused(f".git names a ref over {MAX_CHECKOUT_DEPTH} folders deep")
    return into


def _count_tree(sha: str, env: dict[str, str], clone: Path) -> None:
    """Refuse the commit if checking it out would write more than MAX_CHECKOUT_FILES files or MAX_CHECKOUT_BYTES,
    or folders MAX_CHECKOUT_DEPTH deep, counted from the tree's listing (read as it comes, stopped at the cap)
    before anything is written."""
    proc = subprocess.Popen([*GIT, "ls-tree", "-r", "-l", "-z", "--full-tree", sha],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                            cwd=clone)
    timer = threading.Timer(GIT_SECONDS, proc.kill)
    timer.start()
    files = size = 0
    rest = b""
    try:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 16):
            *records, rest = (rest + chunk).split(b"\0")
            for record in records:
                head, _, path = record.partition(b"\t")
                meta = head.split()  # mode, type, object, size ("-" for a submodule)
                files += 1
                size += int(meta[3]) if len(meta) == 4 and meta[3].isdigit() else 0
                if files > MAX_CHECKOUT_FILES or size > MAX_CHECKOUT_BYTES:
                    raise Refused(f"the commit checks out over {MAX_CHECKOUT_FILES} files or "
                                  f"{MAX_CHECKOUT_BYTES >> 20} MB; a lab repository holds a few MB")
                if path.count(b"/") >= MAX_CHECKOUT_DEPTH:
                    raise Refused(f"the commit holds folders over {MAX_CHECKOUT_DEPTH} deep")
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode:  # killed by the timer, or git failed
        raise Refused(f"git cannot list the commit's files within {GIT_SECONDS} s")


def _git(args: list[str], env: dict[str, str], cwd: Path) -> str:
    try:
        done = subprocess.run([*GIT, *args],
                              capture_output=True, text=True, env=env, cwd=cwd, timeout=GIT_SECONDS,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise Refused("--before needs git, which is not on this machine's PATH") from None
    except subprocess.TimeoutExpired:
        raise Refused(f"git took over {GIT_SECONDS} s on this repository") from None
    if done.returncode:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        why = why.replace(f"{cwd}{os.sep}", "")  # the private folder's path: the same row on every run
        raise Refused(f"git cannot read this repository ({why[:200]})")
    return done.stdout


def checkout(repo: Path, before: datetime, into: Path) -> tuple[Path, Commit]:
    """The repository as it was at its last commit before `before`, checked out under `into` (created)."""
    git_dir = repo / ".git"
    if is_link(repo) or is_link(git_dir) or not git_dir.is_dir():
        raise Refused("is not a git repository (no .git folder): --before grades each repository at a commit; "
                      "give the clones `grade batch collect` or `gh teacher download` writes, or leave out --before")
    into.mkdir(parents=True)
    env, clone = _env(into), into / "clone"
    source = _copy_git(git_dir, into / "source.git")
    if not (source / "HEAD").is_file():
        raise Refused("git cannot read this repository (.git has no HEAD)")
    _git(["clone", "--quiet", "--no-local", "--no-checkout", "--", str(source), str(clone)], env, into)
    shutil.rmtree(source, ignore_errors=True)  # the clone holds its own objects
    log = _git(["log", "--format=%H %ct", "HEAD", "--"], env, clone) if (clone / ".git").is_dir() else ""
    commits = [(sha, int(t)) for sha, t in (line.split() for line in log.splitlines() if line.strip())]
    if not commits:
        raise Refused("has no commits")
    cut = before.timestamp()
    on_time = [(t, -i, sha) for i, (sha, t) in enumerate(commits) if t < cut]
    late = len(commits) - len(on_time)
    if not on_time:
        first = iso(datetime.fromtimestamp(min(t for _, t in commits), timezone.utc), before)
        raise Refused(f"late: no commit before the deadline {iso(before)} (the first is from {first}); "
                      f"{late} commit(s) not graded")
    t, _, sha = max(on_time)  # the latest on time; of equal times, the first git lists
    _count_tree(sha, env, clone)
    _git(["checkout", "--quiet", "--detach", sha], env, clone)
    return clone, Commit(sha, iso(datetime.fromtimestamp(t, timezone.utc), before), late)
