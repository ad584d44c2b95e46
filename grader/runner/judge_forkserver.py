"""The judges' fork server: imports torch, pytest, the grader and the hidden cases once, then forks a
fresh judge per piece.

Judges are trusted and never import submission code; each asks the workers' own fork server
(grader.worker.worker_forkserver, started here first, before anything private is loaded) for jailed workers.
Protocol, one JSON object per line: the parent sends {"argv", "cwd", "key", "output", "memory_gb"};
the server answers {"pid"} once the child runs and {"pid", "status"} when it ends. {"op": "twin", "trains"}
forks a twin of the server for a second lane, on the descriptor given with --twin; the answer is {"pid"}, null
where no twin could be made (the parent then grades on one lane).
"""
from __future__ import annotations

import gc
import json
import os
import signal
import sys

from grader.core import host
from grader.worker.worker_forkserver import cache_own_bytecode, die_with_parent


def _warm() -> None:
    import pytest  # noqa: F401
    import pytest_timeout  # noqa: F401
    import torch

    # Nothing a judge does needs torch._dynamo (the stand-in device's mode runs in the workers), nor
    # torch.testing.assert_close's DTensor import (verdicts.is_close compares without it).
    from grader.judge import plugin, reference_code, remote, stub_source, verdicts  # noqa: F401
    from grader import lab
    from grader.lab import artifacts, toy, train  # noqa: F401

    if not lab.missing():  # a student release seals the evaluator: its judges import it from the opened bundle
        from grader.lab import evaluate  # noqa: F401

    # every child would import these again: pytest's built-in plugins and the case modules
    import importlib

    from _pytest.config import default_plugins

    for name in default_plugins:
        try:
            importlib.import_module(f"_pytest.{name}")
        except ImportError:
            pass
    from grader.runner.layout import CASES, PUBLIC

    for folder, package in ((CASES, "grader.cases"), (PUBLIC, "grader.public")):
        for path in sorted(folder.glob("test_*.py")):
            importlib.import_module(f"{package}.{path.stem}")
    torch.set_num_threads(1)
    # what the server imported is permanent: children's collections need not walk torch's object graph (no collection
    # first: it walks that whole graph, 80 ms on the path of every grade, to free the little an import leaves)
    gc.freeze()


def _child(req: dict, server: int) -> None:
    from grader.runner.launch import limit_child, key_pipe

    try:
        sys.dont_write_bytecode = True  # as every child of the grader's: cache_own_bytecode is the server's alone
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's handlers are the server's alone
        signal.signal(signal.SIGINT, signal.default_int_handler)
        die_with_parent(server)
        limit_child(req["memory_gb"])
        os.chdir(req["cwd"])
        r = key_pipe(req["key"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(req["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, open until it exits
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        import pytest
        code = pytest.main(["--attnlab-key-fd", str(r), "--attnlab-worker-fd", str(WORKERS), *req["argv"]])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    except BaseException:  # noqa: BLE001 - a child must never fall back into the server loop
        os._exit(3)


WORKERS = -1  # the descriptor of the workers' fork server, inherited by every judge
JUDGE = 0  # the judge running now: a stop ends its process group


def _stopped(signum: int, frame) -> None:
    """SIGTERM or SIGINT (the run stopping, or its parent dead): end the judge now, then this server; the workers'
    server follows it (die_with_parent)."""
    if JUDGE:
        try:
            os.killpg(JUDGE, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)


def _reset_workers() -> None:
    """Kill whatever workers the judge that just ended left (one stopped at its time limit cannot close them)."""
    from grader.judge.errors import WorkerLost
    from grader.judge.servers import WorkerServer

    try:
        WorkerServer(os.dup(WORKERS)).ask({"op": "reset"}, timeout=30)
    except (WorkerLost, OSError):
        pass


def serve(parent: int | None = None, twin: int | None = None) -> None:
    """Serve the parent's requests on standard input; `twin`: the descriptor a twin of this server would serve."""
    global WORKERS
    import socket
    import subprocess

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped)
    die_with_parent(os.getppid() if parent is None else parent, signal.SIGTERM)
    cache_own_bytecode()
    mine, theirs = socket.socketpair()  # started before _warm(): its memory never held a case
    from grader.core.childenv import worker_env

    # its first workers run unit cases: what training needs (torch._dynamo) waits for the first training worker
    subprocess.Popen(host.python("grader.worker.worker_forkserver", str(theirs.fileno()), str(os.getpid()),
                                 "--units-first"),
                     pass_fds=(theirs.fileno(),), env=worker_env(),
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    theirs.close()
    WORKERS = mine.detach()
    _warm()
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints must never reach the reply channel
    _loop(sys.stdin, reply, twin)
    # the parent closed its end: nothing to tear down, and an interpreter that imported torch takes tenths of a
    # second to (the workers' server sees its channel's end and ends its workers)
    os._exit(0)


def _loop(requests, reply, twin: int | None, control: int | None = None) -> None:
    """Fork a judge per request and wait for it; `control`: the descriptor the requests come on, where it is not
    standard input (a twin's), which no judge keeps."""
    global JUDGE
    for line in requests:
        req = json.loads(line)
        if req.get("op") == "twin":
            pid = _twin(twin, bool(req.get("trains")), reply) if twin is not None else None
            reply.write(json.dumps({"pid": pid}) + "\n")
            twin = None  # one descriptor, one twin
            continue
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            for fd in (twin, control):
                if fd is not None:
                    os.close(fd)
            _child(req, server)
        JUDGE = pid
        reply.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        JUDGE = 0
        _reset_workers()
        code = os.waitstatus_to_exitcode(status)
        reply.write(json.dumps({"pid": pid, "status": code}) + "\n")


def _twin(fd: int, trains: bool, reply) -> int | None:
    """Fork a second server (a lane of its own) that serves `fd`, with a workers' server forked from this one's:
    no second interpreter imports torch. In the parent: the twin's pid, or None where its workers' server or the
    fork failed (this server serves on); the twin dies with this server."""
    global WORKERS
    import socket

    from grader.judge.errors import WorkerLost
    from grader.judge.servers import WorkerServer

    mine, theirs = socket.socketpair()
    try:
        if not WorkerServer(os.dup(WORKERS)).ask({"op": "twin", "trains": trains}, [theirs.fileno()],
                                                 timeout=30).get("pid"):
            raise OSError("the workers' server made no twin")
        server = os.getpid()
        pid = os.fork()
    except (WorkerLost, OSError):
        mine.close()
        os.close(fd)
        return None
    finally:
        theirs.close()
    if pid:
        mine.close()
        os.close(fd)
        return pid
    try:
        die_with_parent(server, signal.SIGTERM)
        os.close(WORKERS)
        WORKERS = mine.detach()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the parent's requests are the parent's (and 0 stays taken: a judge's dup2 targets it)
        os.close(null)
        reply.close()  # the parent's channel is the parent's: its end of file must not wait for this process
        # read and written as standard input and output are (a socket's makefile() would not flush a line)
        _loop(os.fdopen(fd, "r", closefd=False), os.fdopen(fd, "w", buffering=1, closefd=False), None, fd)
        os._exit(0)
    except BaseException:  # noqa: BLE001 - a twin must never fall back into its parent's loop
        os._exit(3)


if __name__ == "__main__":
    twin = sys.argv[sys.argv.index("--twin") + 1] if "--twin" in sys.argv else None
    args = [a for a in sys.argv[1:] if a not in ("--twin", twin)]
    serve(int(args[0]) if args else None, int(twin) if twin is not None else None)
