"""The disk a batch holds at once: what staging a student may write at most, and the bound on it.

Staging a student writes their repository's copy and clone at the deadline (grader/regrade/deadline.py: up to
MAX_GIT_BYTES of .git copied, the clone's own .git, and MAX_CHECKOUT_BYTES checked out) and their unpacked lab files
(grader/regrade/intake.py: a zip, what it unpacks, a notebook); once the lab files are staged for grading, all of it
but those files (MODULES x MAX_FILE at most) is removed (`prune`), long before the student's last case ends.
`Bound` lets staging begin only while the worst case of every staging in flight fits the batch's disk budget: past
it, the next student waits until one in flight is staged; one alone may always go, whatever its worst case.
`WaveCache` drops the machine's page cache before each wave of a batch (grader.core.pagecache).
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from grader.core import pagecache
from grader.core.pieces import MODULES
from grader.regrade import deadline, intake
from grader.runner.stage import MAX_FILE

KEPT_BYTES = (len(MODULES) + 1) * MAX_FILE  # what a staged student keeps until their row: their lab files
UNPACK_BYTES = intake.MAX_ZIP + intake.MAX_UNPACKED + 2 * intake.MAX_NOTEBOOK + KEPT_BYTES  # zip or notebook, parsed
CHECKOUT_BYTES = 2 * deadline.MAX_GIT_BYTES + deadline.MAX_CHECKOUT_BYTES  # .git copied and cloned, checked out
DISK_BYTES = 4 << 30  # the default budget: two checkouts at the deadline at once, and their unpacking


def worst_case(before: bool) -> int:
    """The most one student's staging writes: a checkout at the deadline (with --before) and the unpacking."""
    return UNPACK_BYTES + (CHECKOUT_BYTES if before else 0)


class Bound:
    """At most `budget` bytes of staging in flight, each counted at its worst case; one alone always goes."""

    def __init__(self, budget: int) -> None:
        self.budget, self.held, self.most = budget, 0, 0
        self.ready = threading.Condition()

    @contextmanager
    def hold(self, nbytes: int):
        with self.ready:
            self.ready.wait_for(lambda: self.held == 0 or self.held + nbytes <= self.budget)
            self.held += nbytes
            self.most = max(self.most, self.held)
        try:
            yield
        finally:
            with self.ready:
                self.held -= nbytes
                self.ready.notify_all()


def prune(into: Path, keep: Path) -> None:
    """Remove everything under `into` but `keep` (a folder directly in it): the clone, the checkout, the copies
    unpacking made; a tree too deep for rmtree's recursion is left (deadline.py refuses checkouts that deep)."""
    for entry in os.scandir(into):
        if Path(entry.path) == keep:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except (OSError, RecursionError):
            pass


def remove(path: Path) -> None:
    """rmtree, ignoring errors and a tree too deep for its recursion (deadline.py refuses those: a second guard)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass


def keep_code(staged: Path, into: Path) -> None:
    """The lab files that are graded, kept beside the gradebook for the similarity report."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for module in MODULES:
        src = staged / f"{module}.py"
        if src.is_file() and not src.is_symlink():
            shutil.copyfile(src, into / src.name)


class WaveCache:
    """The page cache dropped before each wave of a batch, so that no earlier wave's workers (nor an earlier run's)
    left bits in it for this one's: a worker that holds a piece's reference runs after every unit case of that piece
    in its own wave (grader.runner.schedule), never before one of a later wave. Where it cannot be dropped (not
    root), the batch's part is one wave, so no such worker runs before any student's unit cases of that piece."""

    def __init__(self, progress: bool) -> None:
        self.progress = progress
        self.kept: str | None = None  # why the cache could not be dropped, once a drop found it so
        self.tried = False

    def drop(self) -> None:
        """Drop it (once a drop failed, none is tried again); said at the first, and where it could not be done."""
        if self.kept is not None:
            return
        self.kept = why = pagecache.drop()
        if self.progress and (why is not None or not self.tried):
            print("page cache dropped before each wave: nothing an earlier student's workers left in it reaches a "
                  "later one" if why is None else
                  f"page cache kept ({why}): the batch grades its part as one wave, every student's unit cases of a "
                  "piece before any worker that holds its reference (a stop then keeps only students whose rows "
                  "were written); as root on a machine of its own it drops the cache before each wave instead",
                  file=sys.stderr)
        self.tried = True

    def wave(self, size: int, students: int) -> int:
        """Students a wave holds: `size` where the cache is dropped before each, else all of them."""
        return size if self.kept is None else max(1, students)
