"""The lab's pytest plugin: `piece`/`points` markers, submission fixtures and signed case records.

Inert unless `--attnlab-submission` is given: then it runs in a grading child process, loads one
piece of the submission, seeds every case, and writes one signed record per case to the records
file. It never computes a score; the parent process does that from the records.
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
PROTECT_HELP = "a folder the submission may not read (repeatable)"
KEY_FD_HELP = "file descriptor from which the parent's one-line signing key is read (then closed)"
MANIFEST_HELP = "write every collected case's piece, points and slowness to this JSON file"
QUICK_HELP = "skip the cases marked slow (the length-30 training run)"

state_key = pytest.StashKey[dict]()
_outcomes_key = pytest.StashKey[list]()
_start_key = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attnlab", "attention lab grading")
    group.addoption("--attnlab-submission", default=None, help=SUBMISSION_HELP)
    group.addoption("--attnlab-piece", default=None, help=PIECE_HELP)
    group.addoption("--attnlab-records", default=None, help=RECORDS_HELP)
    group.addoption("--attnlab-reference", default=None, help=REFERENCE_HELP)
    group.addoption("--attnlab-protect", action="append", default=[], help=PROTECT_HELP)
    group.addoption("--attnlab-key-fd", type=int, default=None, help=KEY_FD_HELP)
    group.addoption("--attnlab-seed", default=None, help=SEED_HELP)
    group.addoption("--attnlab-manifest", default=None, help=MANIFEST_HELP)
    group.addoption("--attnlab-quick", action="store_true", default=False, help=QUICK_HELP)
    parser.addini("attnlab_seed", SEED_HELP, default="0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "piece(name): the lab piece this case grades (encoder, additive, context, luong, decoder, evaluation)")
    config.addinivalue_line("markers", "points(n): the points this case is worth when it passes")
    config.addinivalue_line("markers", "slow: the case trains a model; `grade --quick` leaves it out")
    sub = config.getoption("--attnlab-submission")
    if not sub:
        return
    from . import ROOT, guard

    if config.pluginmanager.is_blocked("terminal"):
        # the child runs with -p no:terminal so its output is only the submission's; pytest-timeout
        # still asks for a terminal writer to dump stacks into, so give it one that writes nowhere
        from _pytest._io import TerminalWriter

        class _Quiet:
            _tw = TerminalWriter(open(os.devnull, "w"))

        config.pluginmanager.register(_Quiet(), "terminalreporter")
    key = _read_key(config.getoption("--attnlab-key-fd"))
    ref_opt = config.getoption("--attnlab-reference")
    ref = Path(ref_opt) if ref_opt else None  # None: a release without its sealed cases, public checks only
    st = {
        "submission": Path(sub).resolve(),
        "reference": ref.resolve() if ref else None,
        "piece": config.getoption("--attnlab-piece"),
        "records": config.getoption("--attnlab-records"),
        "seed": config.getoption("--attnlab-seed") or config.getini("attnlab_seed"),
        "key": key,
        "quick": config.getoption("--attnlab-quick"),
        "reports": {},
        "tainted": [],
    }
    config.stash[state_key] = st
    # the reference must be imported before the guard starts refusing reads of its folder
    from .submission import load_reference

    st["ref"] = load_reference(st["reference"]) if ref else None
    protected = [ROOT / "grader", *map(Path, config.getoption("--attnlab-protect"))]
    protected += ([ref] if ref else []) + ([Path(st["records"]).parent] if st["records"] else [])
    guard.install(st["submission"], protected)


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
        if st["piece"] in (None, piece) and not (st["quick"] and item.get_closest_marker("slow")):
            keep.append(item)
    items[:] = keep


def _piece_and_points(item: pytest.Item) -> tuple[str, int]:
    """Every case must carry the piece it grades and its points."""
    piece, points = item.get_closest_marker("piece"), item.get_closest_marker("points")
    if piece is None or points is None:
        raise pytest.UsageError(f"{item.nodeid} lacks a piece or points marker")
    return piece.args[0], points.args[0]


def _write_manifest(path: Path, items: list[pytest.Item]) -> None:
    from .pieces import PIECES

    found: dict[str, list[dict]] = {p: [] for p in PIECES}
    for item in items:
        piece, points = _piece_and_points(item)
        found[piece].append({"case": item.name, "points": points, "slow": item.get_closest_marker("slow") is not None})
    path.write_text(json.dumps(found, indent=1) + "\n")


@pytest.fixture(scope="session")
def ref(request: pytest.FixtureRequest):
    """The reference solution's modules (encoder, context, additive, luong, decoder, evaluation)."""
    st = _state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    return st["ref"]


@pytest.fixture(scope="session")
def _piece_module(request: pytest.FixtureRequest):
    from .submission import SubmissionError, load_piece

    st = _state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    try:
        return load_piece(st["piece"], st["submission"], st["reference"]), None
    except SubmissionError as e:
        return None, str(e)


@pytest.fixture
def sub(_piece_module, request: pytest.FixtureRequest):
    """The submission's module for the piece under test."""
    mod, error = _piece_module
    if error:
        from .checks import CaseFailure

        raise CaseFailure(error)
    return mod


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest):
    """Seed torch and random from the hidden seed and the case's name: same submission, same score."""
    st = _state(request.config)
    if st is None:
        yield
        return
    import torch

    seed = zlib.crc32(f"{st['seed']}:{request.node.name}".encode())
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
    from . import guard

    msgs = st["reports"].setdefault(item.nodeid, [])
    changed = guard.tampered()
    if changed:
        st["tainted"] += changed
    if st["tainted"]:
        rep.outcome = "failed"
        msgs.append(f"the submission replaced {', '.join(sorted(set(st['tainted'])))}; the grader ignores this piece's results")
    elif rep.failed and call.excinfo is not None:
        msgs.append(explain(call.excinfo.value, item))
        if msgs[-1].startswith("timed out"):
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
    }
    body = json.dumps(record, sort_keys=True)
    mac = hmac.new(st["key"], body.encode(), hashlib.sha256).hexdigest()
    if st["records"]:
        fd = os.open(st["records"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps({"record": body, "mac": mac}) + "\n").encode())
        finally:
            os.close(fd)


HUNG_TIMEOUT = 3.0  # seconds left to each later case of a piece once one of its cases timed out


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper, which reads the marker
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    st = _state(item.config)
    if st is not None and st.get("hung"):
        # a case that does not hang needs well under a second; don't make a hung piece wait minutes
        item.add_marker(pytest.mark.timeout(HUNG_TIMEOUT), append=False)
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_start_key] = time.perf_counter()
    item.stash[_outcomes_key] = []


def explain(exc: BaseException, item: pytest.Item) -> str:
    """Turn whatever a case raised into one line for the student (never the case's source)."""
    from .checks import CaseFailure, where
    from .guard import Blocked

    name = type(exc).__name__
    if isinstance(exc, CaseFailure):
        return str(exc)
    if isinstance(exc, NotImplementedError):
        return f"not implemented yet ({exc})" if str(exc) else "not implemented yet"
    if isinstance(exc, Blocked):
        return str(exc)
    if isinstance(exc, SystemExit):
        return f"your code called sys.exit({exc.code!r}); return a value instead of exiting"
    if isinstance(exc, MemoryError) or "allocate" in str(exc):
        return "ran out of memory: the grader caps each piece's memory; look for a tensor far larger than (B, T_src, H)"
    text = str(exc).strip().splitlines()
    if name == "Failed" and text and text[0].startswith("Timeout"):
        limit = item.get_closest_marker("timeout")
        secs = limit.args[0] if limit else item.config.getini("timeout")
        return f"timed out after {secs} s: look for a loop that never ends"
    if isinstance(exc, RecursionError):
        return "hit Python's recursion limit: a method calls itself"
    return f"{name}: {(text[0] if text else '')[:300]}{where(exc)}"
