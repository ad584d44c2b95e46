"""Issue 31 §3: the disk a batch holds at once is bounded, and a repository `grade batch collect` left out for its
size is an error row naming the cap while the rest of the class is graded."""
from __future__ import annotations

import csv
import json
import shutil
import threading
import time
from datetime import datetime

import pytest
from helpers import REFERENCE

from grader.core.pieces import PIECES
from grader.regrade import deadline, staging
from grader.regrade import roster as rosters
from grader.runner import schedule
from grader.runner.results import Limits
from grader.verbs import batch as verb

from .github import commit

PIECE = "context"
QUICK = Limits(30, 120, 6, True)
BEFORE = datetime.fromisoformat("2026-12-01T23:59:00-05:00")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_the_bound_lets_staging_begin_only_while_the_worst_cases_in_flight_fit_and_one_alone_always_goes():
    bound, inside, most = staging.Bound(10), [0], [0]
    lock = threading.Lock()

    def one(n: int) -> None:
        with bound.hold(n):
            with lock:
                inside[0] += n
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= n

    threads = [threading.Thread(target=one, args=(n,)) for n in (4, 4, 4, 4, 30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)  # the one over the budget went alone, never stuck
    assert most[0] == 30 and bound.most == 30 and bound.held == 0
    small = staging.Bound(10)
    for _ in range(3):
        with small.hold(4):
            pass
    assert small.most == 4


def test_the_default_budget_holds_two_checkouts_at_the_deadline_at_once():
    assert 2 * staging.worst_case(True) <= staging.DISK_BYTES < 3 * staging.worst_case(True)
    assert staging.worst_case(True) >= 2 * deadline.MAX_GIT_BYTES + deadline.MAX_CHECKOUT_BYTES


def _klass(root, names=("ada", "bob", "cy")):
    for who in names:
        commit(root / f"attention-lab-{who}", "2026-11-30T12:00:00Z", {"exercises/context.py": REFERENCE / "context.py"})
    return root


@pytest.mark.slow
@needs_git
def test_a_staged_student_keeps_only_their_lab_files_and_staging_waits_at_the_disk_bound(tmp_path, monkeypatch):
    """Three students with --before and three threads: under a budget of one checkout's worst case they are
    checked out one at a time; while any is graded, no clone or checkout of anyone's is left on the disk."""
    monkeypatch.setattr(verb, "PIECES", {PIECE: PIECES[PIECE]})
    klass = _klass(tmp_path / "class")
    inside, most, lock = [0], [0], threading.Lock()
    real_checkout = deadline.checkout

    def checkout(repo, before, into):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.3)
            return real_checkout(repo, before, into)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(deadline, "checkout", checkout)
    monkeypatch.setattr(staging, "DISK_BYTES", staging.worst_case(True))  # the budget of one checkout
    held: list[list[str]] = []
    real_units = schedule.Grading.run_units

    def run_units(self, piece, judge_server):
        batch_tmp = self.submission.parent.parent
        held.append(sorted(p.relative_to(batch_tmp).as_posix() for p in batch_tmp.glob("*/*")))
        return real_units(self, piece, judge_server)

    monkeypatch.setattr(schedule.Grading, "run_units", run_units)
    out = tmp_path / "book" / "grades.csv"
    verb.main(submissions=[klass], out=out, reports=None, jobs=3, seed="0", progress=False, limits=QUICK,
              before=BEFORE)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [r["status"] for r in rows] == ["ok"] * 3 and all(r[PIECE] == r["total"] != "0" for r in rows), rows
    assert most[0] == 1, f"{most[0]} checkouts at once under a budget of one"
    assert held and all(entries == ["0/submission", "1/submission", "2/submission"] for entries in held), held


@pytest.mark.slow
@needs_git
def test_a_repository_left_out_for_its_size_is_an_error_row_naming_the_cap_and_the_rest_are_graded(tmp_path,
                                                                                                    monkeypatch):
    monkeypatch.setattr(verb, "PIECES", {PIECE: PIECES[PIECE]})
    klass = _klass(tmp_path / "class", ("ada", "cy"))
    cut = klass / "attention-lab-bob"
    cut.mkdir()
    (cut / ".attnlab-too-large.json").write_text(json.dumps({"bytes": 3 << 30, "cap": 100 << 20}))
    roster = tmp_path / "roster.txt"
    roster.write_text("ada\nbob\ncy\n")
    out = tmp_path / "book" / "grades.csv"
    verb.main(submissions=[klass], out=out, reports=None, jobs=2, seed="0", progress=False, limits=QUICK,
              before=BEFORE, roster=rosters.read(roster), prefix="attention-lab-")
    rows = {r["student"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert rows["bob"]["status"] == ("error: not graded: its clone is 3072 MB, over the cap of 100 MB a repository "
                                     "(ATTNLAB_MAX_REPO_MB); grade it by hand, or delete its folder and collect "
                                     "again with a larger cap"), rows["bob"]
    assert rows["bob"]["total"] == "0"
    assert rows["ada"]["status"] == rows["cy"]["status"] == "ok" and rows["ada"]["total"] == rows["cy"]["total"] != "0"
