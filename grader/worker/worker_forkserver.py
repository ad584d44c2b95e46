"""The workers' fork server: imports torch once, holds no secret, forks one jailed worker per request.

It is started as its own interpreter (`python -m grader.worker.worker_forkserver FD`) before the judge reads
anything private, so no hidden case, reference or key was ever in its memory to inherit. Requests
arrive on FD as one JSON line with two descriptors attached (the worker's socket and the write end
of its output pipe); the answer is one JSON line.

  {"id", "op": "spawn", "memory_gb", "cpu_seconds", "trains"} -> {"id", "pid", "jail": [layers missing]}
  {"id", "op": "wait", "pid", "grace"}             -> {"id", "status"}  (killed if not gone after grace s)
  {"id", "op": "reset"}                            -> {"id"}  (kills every worker still alive)
  {"id", "op": "twin", "trains"} + a socket        -> {"id", "pid"}  (a copy of this server, serving that socket)

A twin (grader.runner.judge_forkserver's, for a second lane) is forked from this server, not started: it holds
what this one imported and nothing more, and costs no second import of torch.
"""
from __future__ import annotations

import gc
import json
import os
import signal
import socket
import sys
import time


def _warm(trains: bool = True) -> list[str]:
    """Import what workers use, then list the paths a worker may read (never the lab's own folders). `trains`:
    also what a worker that trains needs (optim_ready), now rather than at the first such worker's spawn."""
    import torch

    if trains:
        optim_ready()
    import torch.nn.functional  # noqa: F401
    import torch.utils._python_dispatch  # noqa: F401

    from grader import ROOT
    # no lab module: a piece that needs one is sent its source
    from grader.worker import chain, jail, runtime, wire  # noqa: F401

    runtime.lab_package()

    try:
        import landlock  # noqa: F401
        import pyseccomp  # noqa: F401
    except (ImportError, OSError):
        pass
    from grader.core.datasets import split_text

    runtime.PAIRS = runtime.read_pairs(split_text("train"))  # read before the jail: a worker cannot open it
    torch.set_num_threads(1)
    # torch reads the CPU's description (/proc/cpuinfo, /sys/devices/system/cpu/{possible,present,kernel_max})
    # at its first operation: one here, before any fork, so that a worker needs neither (readable_paths)
    torch.zeros(2).sum()
    # the chain's first run pays numpy's generator and torch's first index_select (about 16 ms of CPU): here, once,
    # rather than in the first bmm chain the context's no-loop case times
    chain.run(runtime._bmm_context, torch.ones(2, 3), torch.ones(2, 3, 1), 2, 0)
    gc.freeze()  # as the judges' server does: a worker's collections need not walk torch's object graph
    return readable_paths(ROOT)


def cache_own_bytecode() -> None:
    """Let this server cache the bytecode of what it imports next (the grader's modules, torch's, pytest's), as
    pip does at install: every child the grader starts runs with PYTHONDONTWRITEBYTECODE, so in a checkout
    installed editable nothing else writes it, and each grade compiled the servers' modules again (about 60 ms
    of every start). Only the servers, which import nothing of a student's; their children do not."""
    sys.dont_write_bytecode = False


def optim_ready() -> None:
    """torch.optim's optimizers import torch._dynamo at their first call (about a second of CPU), which a jailed
    worker cannot do (it fails with FileNotFoundError): a server imports it once, before it forks the first worker
    that trains. Workers that do not train need it nowhere (the stand-in device's mode calls its dispatch as it is)."""
    import torch._dynamo  # noqa: F401


def readable_paths(root) -> list[str]:
    """The interpreter, its libraries and system files; never the lab's repository or an installed grader, nor
    /proc/meminfo, whose counters (Mlocked, KernelStack, ...) any worker can move and every worker can read, nor
    (without a GPU) /proc/cpuinfo and /sys/devices/system/cpu, whose clock speeds and idle-state counters
    (cpuidle: usage, time) move with the machine's load: torch read what it needs of them before the fork."""
    import grader
    from grader.worker.jail import gpu_devices

    forbidden = [os.path.realpath(root), os.path.realpath(os.path.dirname(grader.__file__))]
    # CUDA's driver reads the CPUs' description when it starts in a worker (jail.NVIDIA_INFO opens /sys/devices)
    cpus = ["/proc/cpuinfo", "/sys/devices/system/cpu"] if gpu_devices() else []
    wanted = {"/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime", *cpus,
              "/dev/urandom", sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path,
              # where a GPU machine keeps its driver libraries (Colab: /usr/lib64-nvidia), when they are not in /usr
              *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)}
    out: set[str] = set()
    for entry in wanted:
        if entry and os.path.exists(entry):
            out.update(_without(os.path.realpath(entry), forbidden))
    return sorted(out)


def _without(path: str, forbidden: list[str]) -> list[str]:
    """`path`, or, where it holds a forbidden folder, its other entries (recursively): Landlock only allows."""
    if any(path == f or path.startswith(f + os.sep) for f in forbidden):
        return []
    if not any(f.startswith(path.rstrip(os.sep) + os.sep) for f in forbidden):
        return [path]
    out = []
    for name in os.listdir(path):
        out += _without(os.path.join(path, name), forbidden)
    return out


PR_SET_PDEATHSIG = 1
LIVE: set[int] = set()  # the workers alive now: what a stop ends


def die_with_parent(parent: int, sig: int | None = None) -> None:
    """`sig` (default SIGKILL) to this process when `parent` dies (Linux): a run killed outright (SIGKILL, an OOM
    kill) leaves no fork server or worker behind. The kernel sends it when the thread that forked this one ends; where
    the parent died before this call, it is sent now."""
    if sig is None:
        sig = getattr(signal, "SIGKILL", None)  # the module loads where there is none too (Windows: no fork server)
        if sig is None:
            return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def _stopped(signum: int, frame) -> None:
    """SIGTERM or SIGINT (the run stopping, or its parent dead): end every worker (each leads its group), then this."""
    if sys.platform == "win32":  # the fork server runs only where host.FORK_SERVERS (Linux); serve_one elsewhere
        raise OSError("no fork on Windows")
    for pid in list(LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)


def _spawn(req: dict, fds: list[int], readable: list[str]) -> int:
    if sys.platform == "win32":  # the fork server runs only where host.FORK_SERVERS (Linux); serve_one elsewhere
        raise OSError("no fork on Windows")
    chan, outw = fds
    server = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        sys.dont_write_bytecode = True  # what the server cached is the grader's; a worker writes nothing
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's handlers are the server's alone
        signal.signal(signal.SIGINT, signal.default_int_handler)
        die_with_parent(server)  # dropping to nobody in the jail clears it; then the server's _stopped ends it
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(outw, 1)
        os.dup2(outw, 2)
        os.dup2(chan, 3)
        from grader.worker import jail, runtime

        missing = jail.apply((0, 1, 2, 3), jail.JailLimits(memory_gb=req["memory_gb"], cpu_seconds=req["cpu_seconds"]),
                             readable)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, open until it exits
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        from grader.worker import wire

        wire.send(3, {"jail": missing})
        runtime.main(3)
        sys.stdout.flush()
        os._exit(0)
    except BaseException:  # noqa: BLE001 - a worker must never fall back into the server loop
        os._exit(3)


def serve(control: int, parent: int | None = None, trains: bool = True) -> None:
    """Serve spawn requests on `control`; `trains`: ready the training workers' imports at once (a server whose
    first workers run unit cases leaves that to its first training worker's spawn)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped)
    die_with_parent(os.getppid() if parent is None else parent, signal.SIGTERM)
    cache_own_bytecode()
    readable = _warm(trains)
    from grader.worker import cgroups

    cgroups.sweep()  # what servers killed with their judges left
    _loop(socket.socket(fileno=control), readable)


def _twin(fd: int, trains: bool, old: socket.socket, readable: list[str]) -> int:
    """Fork a copy of this server that serves `fd` (in the parent: its pid); it dies with this one."""
    if sys.platform == "win32":  # the fork server runs only where host.FORK_SERVERS (Linux); serve_one elsewhere
        raise OSError("no fork on Windows")
    server = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        old.close()
        LIVE.clear()  # this server's workers stay this server's
        die_with_parent(server, signal.SIGTERM)
        if trains:
            optim_ready()
        _loop(socket.socket(fileno=fd), readable)
        os._exit(0)
    except BaseException:  # noqa: BLE001 - a twin must never fall back into its parent's loop
        os._exit(3)


def _loop(sock: socket.socket, readable: list[str]) -> None:
    if sys.platform == "win32":  # the fork server runs only where host.FORK_SERVERS (Linux); serve_one elsewhere
        raise OSError("no fork on Windows")
    live = LIVE
    buf = b""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            req = json.loads(line)
            reply = {"id": req.get("id")}
            if req["op"] == "spawn":
                if req.get("trains"):
                    optim_ready()
                try:
                    pid = _spawn(req, fds, readable)
                    live.add(pid)
                    reply["pid"] = pid
                except OSError as e:  # no process to be had (the machine's process table is full): say so, live on
                    reply["error"] = f"cannot start a worker ({e.strerror or e})"
            elif req["op"] == "wait":
                reply["status"] = _wait(req["pid"], req.get("grace", 0.0))
                live.discard(req["pid"])
            elif req["op"] == "reset":
                for pid in live:
                    _wait(pid, 0.0)
                live.clear()
            elif req["op"] == "twin" and fds:
                try:
                    reply["pid"] = _twin(fds[0], bool(req.get("trains")), sock, readable)
                except OSError as e:  # no process to be had: the judges' server grades on one lane
                    reply["error"] = f"cannot fork a twin ({e.strerror or e})"
            for fd in fds:
                os.close(fd)
            fds = []
            sock.sendall((json.dumps(reply) + "\n").encode())
    for pid in live:
        _wait(pid, 0.0)


def _wait(pid: int, grace: float) -> int | None:
    """The worker's exit status, killing it once `grace` seconds pass; None if it is not ours."""
    if sys.platform == "win32":  # the fork server runs only where host.FORK_SERVERS (Linux); serve_one elsewhere
        raise OSError("no fork on Windows")
    from grader.worker.cgroups import leave as leave_cgroups

    end = time.monotonic() + grace
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= end:
                os.kill(pid, signal.SIGKILL)
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            time.sleep(0.002)
    except ChildProcessError:
        return None
    finally:
        leave_cgroups(pid)


def serve_one(port: int) -> None:
    """One worker without fork (Windows, macOS): read the judge's token and limits on stdin, import what workers
    use, connect back over loopback, jail this process, then run the request loop."""
    req = json.loads(sys.stdin.readline())
    readable = _warm()
    chan = socket.create_connection(("127.0.0.1", port), timeout=60)
    chan.settimeout(None)
    chan.sendall(str(req["token"]).encode())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    from grader.worker import jail, runtime, wire

    keep = (0, 1, 2, chan.fileno()) if os.name == "posix" else (0, 1, 2)
    missing = jail.apply(keep, jail.JailLimits(memory_gb=req["memory_gb"], cpu_seconds=req["cpu_seconds"]), readable)
    wire.send(chan, {"jail": missing})
    runtime.main(chan)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1] == "--connect":
        serve_one(int(sys.argv[2]))
    else:
        args = [a for a in sys.argv[1:] if a != "--units-first"]
        serve(int(args[0]), int(args[1]) if len(args) > 1 else None, trains="--units-first" not in sys.argv[1:])
        os._exit(0)  # its workers ended: no interpreter teardown (tenths of a second of CPU beside the next run)
