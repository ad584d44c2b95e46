"""What the judge's pytest plugin (grader.judge.plugin) keeps while it grades one piece, and what it does with it.

`JudgeState` is the plugin's state, kept in the config's stash under `state_key` (as pytest's own plugins keep
theirs): the options it was started with, the piece's worker, and what its cases have told so far. Beside it are
the plugin's helpers: the signing key's read, each case's seed and deadline, the signed record a case leaves, the
one line a case's failure is told in (`explain`), and how a case was stopped (`stop_kind`: a `Lost`, never the
words of a message). Nothing here imports torch or a case; the worker's modules are imported where they are used.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from grader.worker.limits import CASE_TIMEOUT

if TYPE_CHECKING:
    from grader.judge.errors import Lost
    from grader.judge.remote import PieceWorker
    from grader.judge.servers import SpawnedWorkers, WorkerServer
    from grader.judge.workers import Output


@dataclass
class JudgeState:
    """One judge's state, from its options (grader.judge.plugin's `--attnlab-*`) and what its cases did."""

    submission: Path  # the folder laid out like exercises/ whose piece is graded
    reference: Path | None  # None: a release without its sealed cases, public checks only
    piece: str | None  # the piece whose cases run here (None: every piece's)
    records: str | None  # the file that receives one signed record per case
    seed: str  # the hidden seed every case's seed derives from
    key: bytes  # the parent's signing key
    part: str  # all, units or training: which of the piece's cases run
    progress: str | None  # the file that receives a JSON line per training chunk
    memory_gb: float  # each worker's address-space cap
    require_jail: tuple[str, ...]  # jail layers a worker must have before it is sent any source
    worker_fd: int | None  # an inherited worker server's descriptor (None: the judge starts one)
    piece_timeout: float  # seconds the piece may run; a worker's CPU-time limit follows from it
    output: Output  # the tail of what the piece's workers printed
    server: WorkerServer | SpawnedWorkers | None = None  # started on the first case that asks for a worker
    slot: PieceWorker | None = None  # the piece's worker, shared by its cases
    jail: set[str] = field(default_factory=set)  # jail layers a worker of this piece could not put up
    reports: dict[str, list[str]] = field(default_factory=dict)  # each running case's messages, by node id
    ref: Any = None  # the reference solution's modules (grader.judge.reference_code), once loaded
    withheld: str = ""  # why the workers' prints and messages reach no report ("" where they do)
    fault: str = ""  # the grader's own processes failed: the message the parent reports instead of a score
    hung: bool = False  # a case of this piece timed out: each later case gets HUNG_TIMEOUT


state_key = pytest.StashKey[JudgeState]()
outcomes_key = pytest.StashKey[list]()  # an item's outcomes, phase by phase
start_key = pytest.StashKey[float]()  # when an item's setup began
budget_key = pytest.StashKey[float]()  # the case's own deadline, before any backstop is added


def judge_state(config: pytest.Config) -> JudgeState | None:
    """The judge's state, or None where the plugin is not grading (no --attnlab-submission)."""
    return config.stash.get(state_key, None)


def read_key(fd: int | None) -> bytes:
    """The parent's signing key, read and closed before any submission code runs."""
    if fd is None:
        return b""
    data = b""
    while True:
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    if fd == 0:  # standard input (a judge started without fork): keep descriptor 0 taken, by /dev/null
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    else:
        os.close(fd)
    return data.strip()


def withhold_for(st: JudgeState) -> str:
    """Why this piece's workers' prints and messages reach no report ("" where they do): see grader.judge.withhold."""
    from grader.judge import withhold
    from grader.judge.sources import withheld
    from grader.core.pieces import PIECES

    why = withheld(st.piece, st.reference is not None, st.part) if st.piece in PIECES else ""
    if why:
        piece = PIECES[st.piece]
        path = st.submission / f"{piece.module}.py"
        own = path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
        stubs = withhold.stub_messages((st.reference / f"{piece.module}.py").read_text(encoding="utf-8"), piece.name)
        withhold.configure(True, path.name, own, stubs)
    return why


def close(st: JudgeState) -> None:
    """The judge's end: the tail of what the workers printed goes to its stdout (unless withheld), then they stop."""
    text = st.output.text()
    if text and st.withheld:  # their prints stay here: only that there were some (the parent drops it anyway)
        sys.stdout.write("(the workers' output is withheld)\n")
    elif text:
        sys.stdout.write(text)  # the judge's own stdout is the piece's output file: the tail of what workers printed
        sys.stdout.flush()
    if st.slot is not None:
        st.slot.close()
    if st.server is not None:
        st.server.close()


def piece_and_points(item: pytest.Item) -> tuple[str, int]:
    """Every case must carry the piece it grades and its points."""
    piece, points = item.get_closest_marker("piece"), item.get_closest_marker("points")
    if piece is None or points is None:
        raise pytest.UsageError(f"{item.nodeid} lacks a piece or points marker")
    return piece.args[0], points.args[0]


def write_manifest(path: Path, items: list[pytest.Item]) -> None:
    from grader.core.pieces import PIECES

    found: dict[str, list[dict]] = {p: [] for p in PIECES}
    for item in items:
        piece, points = piece_and_points(item)
        entry = {"case": item.name, "points": points, "slow": item.get_closest_marker("slow") is not None}
        if item.get_closest_marker("needs"):
            entry["needs"] = list(item.get_closest_marker("needs").args)
        if item.get_closest_marker("title"):
            entry["title"] = item.get_closest_marker("title").args[0]
        found[piece].append(entry)
    for piece, cases in found.items():
        units = {c["case"] for c in cases if not c["slow"]}
        for c in cases:
            if set(c.get("needs", ())) - units:
                raise pytest.UsageError(f"{c['case']} needs {sorted(set(c['needs']) - units)}, which are not unit "
                                        f"cases of the piece {piece}")
    path.write_text(json.dumps(found, indent=1) + "\n")


def case_seed(st: JudgeState, name: str) -> int:
    """The seed of one case: from the hidden seed and the case's name, the same on every run."""
    return zlib.crc32(f"{st.seed}:{name}".encode())


def case_timeout(item: pytest.Item) -> float:
    """The seconds a case's calls into the worker may take: the judge's own deadline."""
    if budget_key in item.stash:
        return item.stash[budget_key]
    marker = item.get_closest_marker("timeout")
    return float(marker.args[0]) if marker else float(item.config.getini("timeout") or CASE_TIMEOUT)


def write_record(item: pytest.Item, st: JudgeState) -> None:
    outcomes = item.stash.get(outcomes_key, [])
    msgs = st.reports.pop(item.nodeid, [])
    record = {
        "case": item.name,
        "piece": item.get_closest_marker("piece").args[0],
        "passed": bool(outcomes) and all(o == "passed" for o in outcomes),
        "skipped": any(o == "skipped" for o in outcomes) and not any(o == "failed" for o in outcomes),
        "message": msgs[0] if msgs else "",
        "duration": round(time.perf_counter() - item.stash.get(start_key, time.perf_counter()), 3),
        "jail": sorted(st.jail),
    }
    from grader.judge import withhold

    if withhold.take_dropped():  # the message left out something the worker said: the report says why
        record["withheld"] = True
    if st.fault:  # the grader's own processes failed: the parent reports it instead of a score
        record["fault"] = st.fault
    body = json.dumps(record, sort_keys=True)
    mac = hmac.new(st.key, body.encode(), hashlib.sha256).hexdigest()
    if st.records:
        fd = os.open(st.records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps({"record": body, "mac": mac}) + "\n").encode())
        finally:
            os.close(fd)


def stop_kind(exc: BaseException) -> Lost | None:
    """How a case was stopped, as a kind: its worker's (a WorkerLost's `kind`), Lost.TIMED_OUT where pytest-timeout
    stopped the case itself, None where neither. Told by what was raised and where, never by a message's words."""
    from grader.judge.errors import Lost, WorkerLost

    if isinstance(exc, WorkerLost):
        return exc.kind
    if _raised_by_pytest_timeout(exc):
        return Lost.TIMED_OUT
    return None


def _raised_by_pytest_timeout(exc: BaseException) -> bool:
    """Whether `exc` was raised by pytest-timeout's signal handler (`timeout_sigalrm`, which fails the case it
    interrupts): that handler's frame is on the exception's traceback. Its thread method ends the judge instead."""
    handler = getattr(sys.modules.get("pytest_timeout"), "timeout_sigalrm", None)
    code = getattr(handler, "__code__", None)
    tb = exc.__traceback__
    while code is not None and tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def grader_fault(exc: BaseException) -> bool:
    """Whether a case failed because the grader's own processes could not start or run (never the student's)."""
    from grader.judge.errors import Lost

    return stop_kind(exc) is Lost.SERVER


def timed_out(exc: BaseException) -> bool:
    """Whether a case ran past its deadline: its worker timed out (WorkerLost of that kind), or pytest-timeout
    stopped the case itself."""
    from grader.judge.errors import Lost

    return stop_kind(exc) is Lost.TIMED_OUT


def explain(exc: BaseException, item: pytest.Item) -> str:
    """Turn whatever a case raised into one line for the student (never the case's source)."""
    from grader.judge import withhold
    from grader.judge.errors import LoadError, Lost, RemoteError, WorkerLost
    from grader.judge.verdicts import CaseFailure

    name = type(exc).__name__
    if isinstance(exc, (CaseFailure, LoadError)):
        return str(exc)
    if isinstance(exc, NotImplementedError):
        if str(exc) and withhold.not_implemented(str(exc)) is None:  # not the stub's own: text of the worker's
            return f"your code raised NotImplementedError; {withhold.NOTE}"
        return f"not implemented yet ({exc})" if str(exc) else "not implemented yet"
    if isinstance(exc, RemoteError):
        from grader.judge.verdicts import student_failure

        return str(student_failure(exc, "your code"))
    text = str(exc).strip().splitlines()
    if timed_out(exc):
        return f"timed out after {case_timeout(item):g} s: look for a loop that never ends"
    if isinstance(exc, WorkerLost) and exc.kind is Lost.SERVER:
        return f"the grader's worker server failed ({exc}); grade again, and report it if it persists"
    if isinstance(exc, WorkerLost):
        return f"your code {withhold.lost(exc)}: the process running it ended before answering"
    if withhold.active():  # the judge's own error, but about data a worker sent: its type alone
        return withhold.hide("", f"the grader could not run this case ({withhold.error_type(name)}); please report it")
    return f"the grader could not run this case ({name}: {(text[0] if text else '')[:200]}); please report it"
