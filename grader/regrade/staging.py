"""The disk a batch holds at once: what staging a student may write at most, and the bound on it.

Staging a student writes their repository's copy and clone at the deadline (grader/regrade/deadline.py: up to
MAX_GIT_BYTES of .git copied, the clone's own .git, and MAX_CHECKOUT_BYTES checked out) and their unpacked lab files
(grader/regrade/intake.py: a zip, what it unpacks, a notebook); once the lab files are staged for grading, all of it
but those files (MODULES x MAX_FILE at most) is removed (`prune`), long before the student's last case ends.
`Bound` lets staging begin only while the worst case of every staging in flight fits the batch's disk budget: past
it, the next student waits until one in flight is staged; one alone may always go, whatever its worst case.
`drop_page_cache` empties the machine's page cache before a batch stages anyone (docs/threat-model.md).
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

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


def drop_page_cache() -> str:
    """Empty the kernel's page cache where this process may (root on Linux), so that no earlier run's workers
    (an earlier batch, `grade --plots`) left bits in it for this batch's; says which it was."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:  # opened first: no machine-wide sync where it cannot drop
            if sys.platform != "win32":  # always, past that open (no /proc there); os.sync is POSIX's
                os.sync()  # dirty pages are written back first, so the drop leaves none behind
            f.write("1\n")
        return "page cache dropped: nothing an earlier run left in it reaches this batch"
    except OSError as e:
        return (f"page cache kept ({e.strerror or e}): run the batch as root on a machine of its own to have it "
                "dropped; see the README's threat model")
