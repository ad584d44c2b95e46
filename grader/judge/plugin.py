"""The lab's pytest plugin: `piece`/`points` markers, submission fixtures and signed case records.

Inert unless `--attnlab-submission` is given: then it runs in the judge, a trusted process that
holds the hidden cases and the reference but never imports submission code. The `sub` fixture is a
handle on the piece's jailed worker (grader.judge.remote), reset for each case, that runs the student's file; the
plugin seeds every case and writes one signed record per case. It never computes a score; the
parent process does that from the manifest and the records.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import sys
import time
import zlib
from pathlib import Path

import pytest

SUBMISSION_HELP = "folder laid out like exercises/ whose piece is graded (turns the plugin on)"
PIECE_HELP = "the piece whose cases run in this process"
RECORDS_HELP = "file that receives one signed JSON record per case"
SEED_HELP = "hidden seed every case's random inputs derive from (instructors rotate it)"
REFERENCE_HELP = "folder holding the reference solution"
WORKER_FD_HELP = "descriptor of a running worker server (grader.worker.forkserver); without it the judge starts one"
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

state_key = pytest.StashKey[dict]()
_outcomes_key = pytest.StashKey[list]()
_start_key = pytest.StashKey[float]()
_budget_key = pytest.StashKey[float]()  # the case's own deadline, before any backstop is added


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attnlab", "attention lab grading")
    group.addoption("--attnlab-submission", default=None, help=SUBMISSION_HELP)
    group.addoption("--attnlab-piece", default=None, help=PIECE_HELP)
    group.addoption("--attnlab-records", default=None, help=RECORDS_HELP)
    group.addoption("--attnlab-reference", default=None, help=REFERENCE_HELP)
    group.addoption("--attnlab-worker-fd", type=int, default=None, help=WORKER_FD_HELP)
    group.addoption("--attnlab-memory-gb", type=float, default=6.0, help=MEMORY_HELP)
    group.addoption("--attnlab-piece-timeout", type=float, default=1200.0, help=PIECE_TIMEOUT_HELP)
    group.addoption("--attnlab-key-fd", type=int, default=None, help=KEY_FD_HELP)
    group.addoption("--attnlab-seed", default=None, help=SEED_HELP)
    group.addoption("--attnlab-manifest", default=None, help=MANIFEST_HELP)
    group.addoption("--attnlab-quick", action="store_true", default=False, help=QUICK_HELP)
    group.addoption("--attnlab-part", choices=("all", "units", "training"), default="all", help=PART_HELP)
    group.addoption("--attnlab-progress", default=None, help=PROGRESS_HELP)
    group.addoption("--attnlab-require-jail", default="", help=REQUIRE_JAIL_HELP)
    parser.addini("attnlab_seed", SEED_HELP, default="0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "piece(name): the lab piece this case grades (encoder, additive, context, luong, decoder, evaluation)")
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
            _tw = TerminalWriter(open(os.devnull, "w"))

        config.pluginmanager.register(_Quiet(), "terminalreporter")
    key = _read_key(config.getoption("--attnlab-key-fd"))
    ref_opt = config.getoption("--attnlab-reference")
    ref = Path(ref_opt) if ref_opt else None  # None: a release without its sealed cases, public checks only
    if ref:  # an opened bundle: the lab modules a release seals (grader.lab.SEALED) sit beside its reference
        from grader import lab

        lab.attach(ref.resolve().parent)
    from grader.judge.workers import Output
    from grader.judge.reference_code import load_reference

    st = {
        "submission": Path(sub).resolve(),
        "reference": ref.resolve() if ref else None,
        "piece": config.getoption("--attnlab-piece"),
        "records": config.getoption("--attnlab-records"),
        "seed": config.getoption("--attnlab-seed") or config.getini("attnlab_seed"),
        "key": key,
        "part": "units" if config.getoption("--attnlab-quick") else config.getoption("--attnlab-part"),
        "progress": config.getoption("--attnlab-progress"),
        "memory_gb": config.getoption("--attnlab-memory-gb"),
        "require_jail": tuple(x for x in config.getoption("--attnlab-require-jail").split(",") if x),
        "worker_fd": config.getoption("--attnlab-worker-fd"),
        "server": None,
        "slot": None,  # the piece's worker, shared by its cases
        "piece_timeout": config.getoption("--attnlab-piece-timeout"),
        "output": Output(),
        "jail": set(),
        "reports": {},
    }
    config.stash[state_key] = st
    st["ref"] = load_reference(st["reference"]) if ref else None
    st["withheld"] = _withhold(st)


def _withhold(st: dict) -> str:
    """Why this piece's workers' prints and messages reach no report ("" where they do): see grader.judge.withhold."""
    from grader.judge import withhold
    from grader.judge.sources import withheld
    from grader.pieces import PIECES

    why = withheld(st["piece"], st["reference"] is not None, st["part"]) if st["piece"] in PIECES else ""
    if why:
        piece = PIECES[st["piece"]]
        path = st["submission"] / f"{piece.module}.py"
        own = path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
        stubs = withhold.stub_messages((st["reference"] / f"{piece.module}.py").read_text(encoding="utf-8"), piece.name)
        withhold.configure(True, path.name, own, stubs)
    return why


def pytest_unconfigure(config: pytest.Config) -> None:
    st = _state(config)
    if st is None:
        return
    text = st["output"].text()
    if text and st["withheld"]:  # their prints stay here: only that there were some (the parent drops it anyway)
        sys.stdout.write("(the workers' output is withheld)\n")
    elif text:
        sys.stdout.write(text)  # the judge's own stdout is the piece's output file: the tail of what workers printed
        sys.stdout.flush()
    if st["slot"] is not None:
        st["slot"].close()
    if st["server"] is not None:
        st["server"].close()


def _read_key(fd: int | None) -> bytes:
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


def _state(config: pytest.Config) -> dict | None:
    return config.stash.get(state_key, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    out = config.getoption("--attnlab-manifest")
    if out:
        _write_manifest(Path(out), items)
    st = _state(config)
    if st is None:
        return
    keep = []
    for item in items:
        piece, _ = _piece_and_points(item)
        slow = item.get_closest_marker("slow") is not None
        if st["piece"] in (None, piece) and {"all": True, "units": not slow, "training": slow}[st["part"]]:
            keep.append(item)
    items[:] = keep


def _piece_and_points(item: pytest.Item) -> tuple[str, int]:
    """Every case must carry the piece it grades and its points."""
    piece, points = item.get_closest_marker("piece"), item.get_closest_marker("points")
    if piece is None or points is None:
        raise pytest.UsageError(f"{item.nodeid} lacks a piece or points marker")
    return piece.args[0], points.args[0]


def _write_manifest(path: Path, items: list[pytest.Item]) -> None:
    from grader.pieces import PIECES

    found: dict[str, list[dict]] = {p: [] for p in PIECES}
    for item in items:
        piece, points = _piece_and_points(item)
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


@pytest.fixture(scope="session")
def ref(request: pytest.FixtureRequest):
    """The reference solution's modules (encoder, context, additive, luong, decoder, evaluation)."""
    st = _state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    return st["ref"]


def case_seed(st: dict, name: str) -> int:
    """The seed of one case: from the hidden seed and the case's name, the same on every run."""
    return zlib.crc32(f"{st['seed']}:{name}".encode())


def case_timeout(item: pytest.Item) -> float:
    """The seconds a case's calls into the worker may take: the judge's own deadline."""
    if _budget_key in item.stash:
        return item.stash[_budget_key]
    marker = item.get_closest_marker("timeout")
    return float(marker.args[0]) if marker else float(item.config.getini("timeout") or 15)


@pytest.fixture
def progress(request: pytest.FixtureRequest):
    """report(**fields): one JSON line in the progress file the parent shows while a case trains (display only)."""
    st = _state(request.config)
    path = st and st.get("progress")

    def report(**fields) -> None:
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"case": request.node.name, **fields}) + "\n")

    return report


@pytest.fixture
def sub(request: pytest.FixtureRequest):
    """The student's file for the piece under test, in the piece's jailed worker (grader.judge.remote.Submission)."""
    from grader.judge.workers import worker_server
    from grader.judge.sources import STUBBED, lab_sources, student_sources
    from grader.judge.remote import Slot, Submission
    from grader.pieces import PIECES
    from grader.judge.reference_code import ORDER

    st = _state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    stem = PIECES[st["piece"]].module
    path = st["submission"] / f"{stem}.py"
    if not path.is_file() or path.is_symlink():
        from grader.judge.verdicts import CaseFailure

        raise CaseFailure(f"{path.name} is missing from the submission folder; restore it from the lab.")
    if st["slot"] is None:
        if st["server"] is None:
            st["server"] = worker_server(st["worker_fd"])
        sources = student_sources(st["submission"], st["reference"], stem, ORDER, stubbed=st["piece"] in STUBBED)
        st["slot"] = Slot(st["server"], sources, stem, path.name, st["output"], st["memory_gb"],
                          int(st["piece_timeout"]) + 60,
                          # the lab's training code (Luong's encoder and decode loop among it) only where the
                          # training case runs: a units run is graded alone and must hold no other piece's answer
                          lab=lab_sources(PIECES[st["piece"]].lab) if st["part"] != "units" else [],
                          required=st["require_jail"])
    handle = Submission(st["slot"], case_seed(st, request.node.name), time.monotonic() + case_timeout(request.node))
    try:
        yield handle
    finally:
        handle.close()
        st["jail"].update(handle.jail)


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest):
    """Seed torch and random from the hidden seed and the case's name: same submission, same score."""
    st = _state(request.config)
    if st is None:
        yield
        return
    import torch

    seed = case_seed(st, request.node.name)
    torch.manual_seed(seed)
    random.seed(seed)
    torch.set_num_threads(1)
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    rep = yield
    st = _state(item.config)
    if st is None:
        return rep
    msgs = st["reports"].setdefault(item.nodeid, [])
    if rep.failed and call.excinfo is not None:
        msgs.append(explain(call.excinfo.value, item))
        if grader_fault(call.excinfo.value):
            st["fault"] = msgs[-1]
        if timed_out(call.excinfo.value):  # by what was raised, never by the words of its message
            st["hung"] = True
    elif rep.skipped and call.excinfo is not None:
        msgs.append("skipped: " + str(getattr(call.excinfo.value, "msg", call.excinfo.value)))
    item.stash.setdefault(_outcomes_key, []).append(rep.outcome)
    if rep.when == "teardown":
        _write_record(item, st)
    return rep


def _write_record(item: pytest.Item, st: dict) -> None:
    outcomes = item.stash.get(_outcomes_key, [])
    msgs = st["reports"].pop(item.nodeid, [])
    record = {
        "case": item.name,
        "piece": item.get_closest_marker("piece").args[0],
        "passed": bool(outcomes) and all(o == "passed" for o in outcomes),
        "skipped": any(o == "skipped" for o in outcomes) and not any(o == "failed" for o in outcomes),
        "message": msgs[0] if msgs else "",
        "duration": round(time.perf_counter() - item.stash.get(_start_key, time.perf_counter()), 3),
        "jail": sorted(st["jail"]),
    }
    from grader.judge import withhold

    if withhold.take_dropped():  # the message left out something the worker said: the report says why
        record["withheld"] = True
    if st.get("fault"):  # the grader's own processes failed: the parent reports it instead of a score
        record["fault"] = st["fault"]
    body = json.dumps(record, sort_keys=True)
    mac = hmac.new(st["key"], body.encode(), hashlib.sha256).hexdigest()
    if st["records"]:
        fd = os.open(st["records"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps({"record": body, "mac": mac}) + "\n").encode())
        finally:
            os.close(fd)


HUNG_TIMEOUT = 3.0  # seconds left to each later case of a piece once one of its cases timed out
THREAD_BACKSTOP = 60.0  # seconds past a case's own deadline before pytest-timeout's thread method ends the judge


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper, which reads the marker
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    st = _state(item.config)
    if st is not None:
        # a case that does not hang needs well under a second; don't make a hung piece wait minutes
        budget = HUNG_TIMEOUT if st.get("hung") else case_timeout(item)
        item.stash[_budget_key] = budget
        if _thread_method(item.config):
            # pytest-timeout's thread method ends the whole judge, losing every later case: there it is only a
            # backstop behind the judge's own deadline, which stops the worker and fails just this case
            item.add_marker(pytest.mark.timeout(budget + THREAD_BACKSTOP), append=False)
        elif st.get("hung"):
            item.add_marker(pytest.mark.timeout(budget), append=False)
    return (yield)


def _thread_method(config: pytest.Config) -> bool:
    try:
        return config.getini("timeout_method") == "thread"
    except ValueError:  # pytest-timeout is not loaded
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_start_key] = time.perf_counter()
    item.stash[_outcomes_key] = []


def grader_fault(exc: BaseException) -> bool:
    """Whether a case failed because the grader's own processes could not start or run (never the student's)."""
    from grader.judge.workers import Lost, WorkerLost

    return isinstance(exc, WorkerLost) and exc.kind is Lost.SERVER


def timed_out(exc: BaseException) -> bool:
    """Whether a case ran past its deadline: its worker timed out (WorkerLost of that kind), or pytest-timeout
    stopped the case itself (its Failed, "Timeout ...")."""
    from grader.judge.workers import Lost, WorkerLost

    if isinstance(exc, WorkerLost):
        return exc.kind is Lost.TIMED_OUT
    text = str(exc).strip()
    return type(exc).__name__ == "Failed" and text.startswith("Timeout")


def explain(exc: BaseException, item: pytest.Item) -> str:
    """Turn whatever a case raised into one line for the student (never the case's source)."""
    from grader.judge import withhold
    from grader.judge.verdicts import CaseFailure
    from grader.judge.workers import LoadError, Lost, RemoteError, WorkerLost

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
