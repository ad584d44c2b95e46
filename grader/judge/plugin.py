"""The lab's pytest plugin: `piece`/`points` markers, submission fixtures and signed case records.

Inert unless `--attnlab-submission` is given: then it runs in the judge, a trusted process that
holds the hidden cases and the reference but never imports submission code. The `sub` fixture is a
handle on the piece's jailed worker (grader.judge.remote), reset for each case, that runs the student's file; the
plugin seeds every case and writes one signed record per case. It never computes a score; the
parent process does that from the manifest and the records. Its state (`JudgeState`, in the config's stash) and
the helpers its hooks share are in grader.judge.state; the default limits in grader.worker.limits.
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from grader.judge.state import (JudgeState, budget_key, case_seed, case_timeout, close, explain, grader_fault,
                                judge_state, outcomes_key, piece_and_points, read_key, start_key, state_key,
                                timed_out, withhold_for, write_manifest, write_record)
from grader.worker.limits import HUNG_TIMEOUT, MEMORY_GB, PIECE_TIMEOUT, THREAD_BACKSTOP, worker_cpu_seconds

__all__ = ["JudgeState", "case_seed", "case_timeout", "explain", "grader_fault", "state_key", "timed_out",
           "HUNG_TIMEOUT", "THREAD_BACKSTOP"]  # named here too: cases and tests import them from the plugin

SUBMISSION_HELP = "folder laid out like exercises/ whose piece is graded (turns the plugin on)"
PIECE_HELP = "the piece whose cases run in this process"
RECORDS_HELP = "file that receives one signed JSON record per case"
SEED_HELP = "hidden seed every case's random inputs derive from (instructors rotate it)"
REFERENCE_HELP = "folder holding the reference solution"
WORKER_FD_HELP = "descriptor of a running worker server (grader.worker.worker_forkserver); without it the judge starts one"
MEMORY_HELP = "address-space cap of each worker, in GB"
PIECE_TIMEOUT_HELP = "seconds the piece may run; a worker's CPU-time limit follows from it"
KEY_FD_HELP = "file descriptor from which the parent's one-line signing key is read (then closed)"
MANIFEST_HELP = "write every collected case's piece, points and slowness to this JSON file"
QUICK_HELP = "skip the cases marked slow (the length-30 training run)"
PART_HELP = ("which of the piece's cases to run: all, units (all but the slow ones, like --attnlab-quick) or "
             "training (only the slow ones, whose worker alone is given the lab's training code)")
REQUIRE_JAIL_HELP = ("jail layers a worker must have before it is sent any source, comma-separated (landlock, seccomp): "
                     "a run that opened sealed cases with a key requires them on Linux")
PROGRESS_HELP = "file that receives a JSON line per training chunk (step, validation accuracy) for the parent to show"

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attnlab", "attention lab grading")
    group.addoption("--attnlab-submission", default=None, help=SUBMISSION_HELP)
    group.addoption("--attnlab-piece", default=None, help=PIECE_HELP)
    group.addoption("--attnlab-records", default=None, help=RECORDS_HELP)
    group.addoption("--attnlab-reference", default=None, help=REFERENCE_HELP)
    group.addoption("--attnlab-worker-fd", type=int, default=None, help=WORKER_FD_HELP)
    group.addoption("--attnlab-memory-gb", type=float, default=MEMORY_GB, help=MEMORY_HELP)
    group.addoption("--attnlab-piece-timeout", type=float, default=PIECE_TIMEOUT, help=PIECE_TIMEOUT_HELP)
    group.addoption("--attnlab-key-fd", type=int, default=None, help=KEY_FD_HELP)
    group.addoption("--attnlab-seed", default=None, help=SEED_HELP)
    group.addoption("--attnlab-manifest", default=None, help=MANIFEST_HELP)
    group.addoption("--attnlab-quick", action="store_true", default=False, help=QUICK_HELP)
    group.addoption("--attnlab-part", choices=("all", "units", "training"), default="all", help=PART_HELP)
    group.addoption("--attnlab-progress", default=None, help=PROGRESS_HELP)
    group.addoption("--attnlab-require-jail", default="", help=REQUIRE_JAIL_HELP)
    parser.addini("attnlab_seed", SEED_HELP, default="0")


def pytest_configure(config: pytest.Config) -> None:
    from grader.core.pieces import PIECES

    config.addinivalue_line("markers", f"piece(name): the lab piece this case grades ({', '.join(PIECES)})")
    config.addinivalue_line("markers", "points(n): the points this case is worth when it passes")
    config.addinivalue_line("markers", "slow: the case trains a model; `grade --quick` leaves it out")
    config.addinivalue_line("markers", "needs(*cases): the unit cases of the piece that must pass, run alone, before "
                            "this training case runs (grade runs training side by side with another piece)")
    config.addinivalue_line("markers", "title(text): how reports name the case where its function name cannot "
                            "(an apostrophe); otherwise the name without test_ and underscores")
    sub = config.getoption("--attnlab-submission")
    if not sub:
        return
    if config.pluginmanager.is_blocked("terminal"):
        # the judge runs with -p no:terminal so its output is only the workers'; pytest-timeout
        # still asks for a terminal writer to dump stacks into, so give it one that writes nowhere
        from _pytest._io import TerminalWriter

        class _Quiet:
            _tw = TerminalWriter(open(os.devnull, "w"))  # noqa: SIM115 - open for the judge's life

        config.pluginmanager.register(_Quiet(), "terminalreporter")
    key = read_key(config.getoption("--attnlab-key-fd"))
    ref_opt = config.getoption("--attnlab-reference")
    ref = Path(ref_opt) if ref_opt else None  # None: a release without its sealed cases, public checks only
    if ref:  # an opened bundle: the lab modules a release seals (grader.lab.SEALED) sit beside its reference
        from grader import lab

        lab.attach(ref.resolve().parent)
    from grader.judge.workers import Output
    from grader.judge.reference_code import load_reference

    st = JudgeState(
        submission=Path(sub).resolve(),
        reference=ref.resolve() if ref else None,
        piece=config.getoption("--attnlab-piece"),
        records=config.getoption("--attnlab-records"),
        seed=config.getoption("--attnlab-seed") or config.getini("attnlab_seed"),
        key=key,
        part="units" if config.getoption("--attnlab-quick") else config.getoption("--attnlab-part"),
        progress=config.getoption("--attnlab-progress"),
        memory_gb=config.getoption("--attnlab-memory-gb"),
        require_jail=tuple(x for x in config.getoption("--attnlab-require-jail").split(",") if x),
        worker_fd=config.getoption("--attnlab-worker-fd"),
        piece_timeout=config.getoption("--attnlab-piece-timeout"),
        output=Output(),
    )
    config.stash[state_key] = st
    st.ref = load_reference(st.reference) if ref else None
    st.withheld = withhold_for(st)


def pytest_unconfigure(config: pytest.Config) -> None:
    st = judge_state(config)
    if st is not None:
        close(st)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    out = config.getoption("--attnlab-manifest")
    if out:
        write_manifest(Path(out), items)
    st = judge_state(config)
    if st is None:
        return
    keep = []
    for item in items:
        piece, _ = piece_and_points(item)
        slow = item.get_closest_marker("slow") is not None
        if st.piece in (None, piece) and {"all": True, "units": not slow, "training": slow}[st.part]:
            keep.append(item)
    items[:] = keep


@pytest.fixture(scope="session")
def ref(request: pytest.FixtureRequest):
    """The reference solution's modules (one attribute per piece's module)."""
    st = judge_state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    return st.ref


@pytest.fixture
def progress(request: pytest.FixtureRequest):
    """report(**fields): one JSON line in the progress file the parent shows while a case trains (display only)."""
    st = judge_state(request.config)
    path = st and st.progress

    def report(**fields) -> None:
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"case": request.node.name, **fields}) + "\n")

    return report


@pytest.fixture
def sub(request: pytest.FixtureRequest):
    """The student's file for the piece under test, in the piece's jailed worker (grader.judge.remote.CaseHandle)."""
    from grader.judge.servers import worker_server
    from grader.judge.sources import lab_sources, student_sources
    from grader.judge.remote import PieceWorker, CaseHandle
    from grader.core.pieces import PIECES
    from grader.judge.reference_code import ORDER

    st = judge_state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    stem = PIECES[st.piece].module
    path = st.submission / f"{stem}.py"
    if not path.is_file() or path.is_symlink():
        from grader.judge.verdicts import CaseFailure

        raise CaseFailure(f"{path.name} is missing from the submission folder; restore it from the lab.")
    if st.slot is None:
        if st.server is None:
            st.server = worker_server(st.worker_fd)
        sources = student_sources(st.submission, st.reference, stem, ORDER,
                                  stubbed=PIECES[st.piece].stubbed)
        st.slot = PieceWorker(st.server, sources, stem, path.name, st.output, st.memory_gb,
                       worker_cpu_seconds(st.piece_timeout),
                       # the lab's training code (Luong's encoder and decode loop among it) only where the
                       # training case runs: a units run is graded alone and must hold no other piece's answer
                       lab=lab_sources(PIECES[st.piece].lab) if st.part != "units" else [],
                       required=st.require_jail)
    handle = CaseHandle(st.slot, case_seed(st, request.node.name), time.monotonic() + case_timeout(request.node))
    try:
        yield handle
    finally:
        handle.close()
        st.jail.update(handle.jail)


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest):
    """Seed torch and random from the hidden seed and the case's name: same submission, same score."""
    st = judge_state(request.config)
    if st is None:
        yield
        return
    import torch

    from grader.worker import seeding

    seed = case_seed(st, request.node.name)
    seeding.manual_seed(seed)
    random.seed(seed)
    torch.set_num_threads(1)
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    rep = yield
    st = judge_state(item.config)
    if st is None:
        return rep
    msgs = st.reports.setdefault(item.nodeid, [])
    if rep.failed and call.excinfo is not None:
        msgs.append(explain(call.excinfo.value, item))
        if grader_fault(call.excinfo.value):  # a kind (grader.judge.state.stop_kind), never a message's words
            st.fault = msgs[-1]
        if timed_out(call.excinfo.value):
            st.hung = True
    elif rep.skipped and call.excinfo is not None:
        msgs.append("skipped: " + str(getattr(call.excinfo.value, "msg", call.excinfo.value)))
    item.stash.setdefault(outcomes_key, []).append(rep.outcome)
    if rep.when == "teardown":
        write_record(item, st)
    return rep


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper, which reads the marker
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    st = judge_state(item.config)
    if st is not None:
        # a case that does not hang needs well under a second; don't make a hung piece wait minutes
        budget = HUNG_TIMEOUT if st.hung else case_timeout(item)
        item.stash[budget_key] = budget
        if _thread_method(item.config):
            # pytest-timeout's thread method ends the whole judge, losing every later case: there it is only a
            # backstop behind the judge's own deadline, which stops the worker and fails just this case
            item.add_marker(pytest.mark.timeout(budget + THREAD_BACKSTOP), append=False)
        elif st.hung:
            item.add_marker(pytest.mark.timeout(budget), append=False)
    return (yield)


def _thread_method(config: pytest.Config) -> bool:
    try:
        return config.getini("timeout_method") == "thread"
    except ValueError:  # pytest-timeout is not loaded
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[start_key] = time.perf_counter()
    item.stash[outcomes_key] = []
