"""The machine's page cache emptied between two students' grades, so that no worker of one leaves bits in it that a
worker of the next can time (docs/threat-model.md, "Machine-wide state").

Which files are cached is machine-wide state every worker can move (by reading a file the jail lets it read) and
measure (by timing a read: about 5 µs cached, 40 µs to 10 ms from disk); so are the kernel's dentries and inodes
(an open() of a file another worker opened is faster). A route that grades one student after
another on one machine (a class regrade's waves, a self-hosted runner's pushes) drops the cache between them:
`drop` writes /proc/sys/vm/drop_caches where this process may (root), else runs HELPER through `sudo -n` where an
instructor installed it (a root-owned script and one sudoers line, grader/templates/classroom50/SETUP.md). Pages a
live process has mapped stay: only the grader's own servers live across students, and no worker can map a page
into them.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys

DROP_CACHES = "/proc/sys/vm/drop_caches"
HELPER = "/usr/local/sbin/attnlab-drop-caches"  # root-owned: `sync; echo 3 > /proc/sys/vm/drop_caches`
FRESH_ENV = "ATTNLAB_FRESH_RUNNER"  # "1": the runner is a new machine for every job (ephemeral), nothing to drop


def drop() -> str | None:
    """Empty the page cache; None when it was emptied, else why it could not be (one clause)."""
    try:
        with open(DROP_CACHES, "w") as f:  # opened first: no machine-wide sync where it cannot drop
            if sys.platform != "win32":  # always, past that open (no /proc there); os.sync is POSIX's
                os.sync()  # dirty pages are written back first, so the drop leaves none behind
            f.write("3\n")  # the pages, and the dentries and inodes: an open() of a file a worker opened is faster
        return None
    except OSError as e:
        direct = e.strerror or str(e)
    why = _helper_problem()
    if why:
        return f"{DROP_CACHES}: {direct}; {why}"
    try:
        done = subprocess.run(["sudo", "-n", HELPER], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{DROP_CACHES}: {direct}; sudo -n {HELPER} could not run ({e})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
        return f"{DROP_CACHES}: {direct}; sudo -n {HELPER} failed ({last})"
    return None


def _helper_problem() -> str | None:
    """Why HELPER may not be run for this: missing, not root's, or writable by anyone but root (whoever can write it
    runs their code as root through the sudoers line)."""
    try:
        st = os.stat(HELPER)
    except OSError:
        return f"no {HELPER} (SETUP.md installs it, with a sudoers line)"
    if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or not stat.S_ISREG(st.st_mode):
        return f"{HELPER} is not a file only root may write; not run"
    return None


def fresh_machine() -> bool:
    """Whether the instructor declared this runner a new machine for every job, whose cache holds no other push's."""
    return os.environ.get(FRESH_ENV, "").strip() == "1"
