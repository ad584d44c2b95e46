"""The judge's side of a jailed worker: the server that forks workers (or a fresh interpreter per worker where
there is no fork), one worker's process and socket, its prints, and the errors it can end a call with."""
from __future__ import annotations

import enum
import itertools
import json
import os
import secrets
import select
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from typing import Callable

from grader import host
from grader.host import signal_name
from grader.worker import wire

MAX_CALLBACKS = 20000  # questions one call may ask the judge's model (a greedy decode asks one per step)
OUTPUT_TAIL = 64 * 1024  # bytes of a piece's prints kept for the report


class RemoteError(Exception):
    """Student code raised; the type name, first line and place in the student's file came back as data."""

    def __init__(self, kind: str, type_name: str, message: str, where: str) -> None:
        super().__init__(message)
        self.kind, self.type_name, self.where = kind, type_name, where


class Lost(str, enum.Enum):
    """How a worker was lost (WorkerLost.kind): what the judge and the reports decide by, never the message's words.
    Plain strings, which grader.judge.withhold names without importing this module (StrEnum's are: not in 3.10)."""
    __str__, __format__ = str.__str__, str.__format__

    TIMED_OUT = "timed_out"  # past the call's deadline: the judge stopped it
    STOPPED = "stopped"  # killed by the judge (SIGKILL), or no exit status to be had
    GONE = "gone"  # already dead when asked again
    CRASHED = "crashed"  # ended by a signal of its own
    EXITED = "exited"  # exited with a code before answering
    MALFORMED = "malformed"  # sent something that is not an answer
    SERVER = "server"  # the workers' fork server (or the machine's jail) failed, not the student's code


class WorkerLost(Exception):
    """The worker died, hung or sent what is not data: `kind` (a Lost) says which, str() says it to the student."""

    def __init__(self, message: str, kind: Lost) -> None:
        super().__init__(message)
        self.kind = Lost(kind)

    @property
    def timed_out(self) -> bool:
        return self.kind is Lost.TIMED_OUT

    @property
    def server(self) -> bool:
        return self.kind is Lost.SERVER


class WorkerServer:
    """The judge's connection to grader.worker.forkserver, started here when no descriptor was inherited (Linux)."""

    def __init__(self, fd: int | None = None) -> None:
        self.proc = None
        if fd is None:
            mine, theirs = socket.socketpair()
            from grader.childenv import worker_env

            self.proc = subprocess.Popen(host.python("grader.worker.forkserver", str(theirs.fileno())),
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=worker_env(), cwd=tempfile.gettempdir())
            theirs.close()
            self.sock = mine
        else:
            self.sock = socket.socket(fileno=fd)
        self.ids = itertools.count(int(time.time() * 1000) % 10**9)
        self.buf = b""

    def start(self, memory_gb: float, cpu_seconds: int) -> tuple[int, socket.socket, int | None]:
        """A new jailed worker: (pid, its channel, the read end of its output pipe)."""
        chan, theirs = socket.socketpair()
        r, w = os.pipe()
        try:
            reply = self.ask({"op": "spawn", "memory_gb": memory_gb, "cpu_seconds": cpu_seconds}, [theirs.fileno(), w])
        except BaseException:
            chan.close()
            os.close(r)
            raise
        finally:
            theirs.close()
            os.close(w)
        if "pid" not in reply:
            chan.close()
            os.close(r)
            raise WorkerLost(f"the worker server {reply.get('error', 'started no worker')}", kind=Lost.SERVER)
        return reply["pid"], chan, r

    def wait(self, pid: int, grace: float) -> int | None:
        return self.ask({"op": "wait", "pid": pid, "grace": grace}).get("status")

    def ask(self, req: dict, fds: list[int] = (), timeout: float = 120.0) -> dict:
        req = {**req, "id": next(self.ids)}
        try:
            socket.send_fds(self.sock, [(json.dumps(req) + "\n").encode()], list(fds))
        except OSError as e:
            raise WorkerLost(f"the worker server is gone ({e.strerror})", kind=Lost.SERVER) from None
        end = time.monotonic() + timeout
        while True:
            while b"\n" not in self.buf:
                wait = end - time.monotonic()
                if wait <= 0 or not select.select([self.sock], [], [], wait)[0]:
                    raise WorkerLost("the worker server did not answer; is the machine overloaded?", kind=Lost.SERVER)
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise WorkerLost("the worker server exited", kind=Lost.SERVER)
                self.buf += chunk
            line, _, self.buf = self.buf.partition(b"\n")
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # the tail of an answer to a judge that was stopped mid-read
            if isinstance(reply, dict) and reply.get("id") == req["id"]:  # other judges' answers are dropped
                return reply

    def close(self) -> None:
        self.sock.close()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class SpawnedWorkers:
    """Workers without fork (Windows, macOS): each is a fresh interpreter that connects back to the judge
    over loopback and proves itself with a one-time token; its prints come through a pipe read by a thread."""

    START_TIMEOUT = 120.0  # a fresh interpreter imports torch before it connects

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, memory_gb: float, cpu_seconds: int) -> tuple[int, socket.socket, subprocess.Popen]:
        from grader.childenv import worker_env

        token = secrets.token_hex(16)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            try:
                proc = subprocess.Popen(host.python("grader.worker.forkserver", "--connect", str(listener.getsockname()[1])),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        env=worker_env(), cwd=tempfile.gettempdir())
            except OSError as e:
                raise WorkerLost(f"a worker could not start ({e.strerror or e})", kind=Lost.SERVER) from None
            self.procs[proc.pid] = proc
            try:
                proc.stdin.write(json.dumps({"token": token, "memory_gb": memory_gb, "cpu_seconds": cpu_seconds}).encode()
                                 + b"\n")
                proc.stdin.close()
            except OSError:
                pass
            chan = self._accept(listener, token, proc)
        return proc.pid, chan, proc

    def _accept(self, listener: socket.socket, token: str, proc: subprocess.Popen) -> socket.socket:
        end = time.monotonic() + self.START_TIMEOUT
        while time.monotonic() < end:
            if proc.poll() is not None:
                tail = proc.stdout.read(4000).decode("utf-8", "replace").strip().splitlines() if proc.stdout else []
                raise WorkerLost(f"a worker exited while starting ({tail[-1][:200] if tail else proc.returncode})",
                                 kind=Lost.SERVER)
            if not select.select([listener], [], [], 0.2)[0]:
                continue
            conn, _ = listener.accept()
            conn.settimeout(10)
            try:
                got = conn.recv(len(token))
            except OSError:
                got = b""
            conn.settimeout(None)
            if got == token.encode():
                return conn
            conn.close()  # not our worker
        self.wait(proc.pid, 0.0)
        raise WorkerLost("a worker did not start in time; is the machine overloaded?", kind=Lost.SERVER)

    def wait(self, pid: int, grace: float) -> int | None:
        proc = self.procs.pop(pid, None)
        if proc is None:
            return None
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None  # stopped by us

    def close(self) -> None:
        """Stop every worker still alive."""
        for pid in list(self.procs):
            self.wait(pid, 0.0)


def worker_server(fd: int | None) -> WorkerServer | SpawnedWorkers:
    """The inherited fork server, a new one (Linux), or fresh interpreters per worker (no fork)."""
    if fd is not None or host.FORK_SERVERS:
        return WorkerServer(fd)
    return SpawnedWorkers()


class Output:
    """The tail of what a piece's workers printed, bounded however much they print."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.lock = threading.Lock()

    def add(self, data: bytes) -> None:
        with self.lock:  # a spawned worker's prints arrive on a reader thread
            self.chunks.append(data)
            self.size += len(data)
            while self.size - len(self.chunks[0]) >= OUTPUT_TAIL:
                self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        with self.lock:
            return b"".join(self.chunks)[-OUTPUT_TAIL:].decode("utf-8", "replace")


class Worker:
    """One jailed worker process: requests go out, plain data comes back before the deadline."""

    def __init__(self, server: WorkerServer | SpawnedWorkers, output: Output, memory_gb: float, cpu_seconds: int) -> None:
        self.server, self.output = server, output
        self.pid, self.chan, out = server.start(memory_gb, cpu_seconds)
        self.fd = self.chan
        self.out: int | None = out if isinstance(out, int) else None
        self.reader: threading.Thread | None = None
        if isinstance(out, subprocess.Popen):  # no select on a Windows pipe: a thread drains it
            self.reader = threading.Thread(target=self._read_pipe, args=(out.stdout,), daemon=True)
            self.reader.start()
        self.dead = False
        self.busy = False
        self.jail: list[str] | None = None

    def _pump(self, fd: int, wait: float | None) -> None:
        """Wait for the channel, draining the worker's prints meanwhile so a chatty worker never blocks."""
        watch = [fd] + ([self.out] if self.out is not None else [])
        ready = select.select(watch, [], [], wait)[0]
        if self.out is not None and self.out in ready:
            data = os.read(self.out, 1 << 16)
            if data:
                self.output.add(data)
            else:
                os.close(self.out)
                self.out = None

    def recv(self, deadline: float) -> object:
        try:
            return wire.recv(self.fd, deadline, on_idle=self._pump)
        except wire.Deadline:
            self.kill()
            raise WorkerLost("timed out", Lost.TIMED_OUT) from None
        except wire.Closed:  # it is ending: give it a moment to say how
            raise WorkerLost(*self._end(grace=0.5)) from None
        except (wire.WireError, MemoryError) as e:
            self.kill()
            raise WorkerLost(f"sent {e or 'an answer too large to open'}", Lost.MALFORMED) from None

    def hello(self, deadline: float) -> list[str]:
        if self.jail is None:
            msg = self.recv(deadline)
            self.jail = [str(x) for x in msg.get("jail", [])] if isinstance(msg, dict) else ["unknown"]
        return self.jail

    def request(self, req: dict, deadline: float, callbacks: Callable[[str, list, dict], object] | None = None) -> object:
        """Send one command and return its decoded value; callbacks answer the questions a remote model asks."""
        if self.dead:
            raise WorkerLost("is gone", Lost.GONE)
        self.hello(deadline)
        try:
            wire.send(self.fd, req)
        except OSError:
            raise WorkerLost(*self._end()) from None
        self.busy = True  # until its answer is in: a judge stopped meanwhile kills the worker, no grace
        asked = 0
        while True:
            reply = self.recv(deadline)
            if not isinstance(reply, dict):
                self.kill()
                raise WorkerLost("sent an answer that is not a record", Lost.MALFORMED)
            if "callback" in reply:
                asked += 1
                self._answer(reply, callbacks, asked)
                continue
            self.busy = False
            if reply.get("ok") is True:
                try:
                    return wire.decode(reply.get("value"))
                except (wire.WireError, MemoryError) as e:
                    self.kill()
                    raise WorkerLost(f"sent {e}", Lost.MALFORMED) from None
            err = reply.get("error")
            if not isinstance(err, dict):
                self.kill()
                raise WorkerLost("sent a malformed error", Lost.MALFORMED)
            raise RemoteError(*(str(err.get(k, ""))[:400] for k in ("kind", "type", "message", "where")))

    def _answer(self, reply: dict, callbacks, asked: int) -> None:
        if callbacks is None or asked > MAX_CALLBACKS:
            answer = {"ok": False, "error": "no model to ask here" if callbacks is None else "too many calls to the model"}
        else:
            try:
                args = wire.decode(reply.get("args"))
                kwargs = wire.decode(reply.get("kwargs"))
                if not isinstance(args, list) or not isinstance(kwargs, dict):
                    raise TypeError("malformed arguments")
                answer = {"ok": True, "value": wire.encode(callbacks(str(reply["callback"]), args, kwargs))}
            except Exception as e:  # noqa: BLE001 - bad arguments from student code are the student's error
                answer = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
        try:
            wire.send(self.fd, answer)
        except OSError:
            pass  # the next recv reports the closed worker

    def kill(self, grace: float = 0.0) -> str:
        """End the worker (after `grace` seconds); returns how it ended, for the student."""
        return self._end(grace)[0]

    def _end(self, grace: float = 0.0) -> tuple[str, Lost]:
        """End the worker (after `grace` seconds): how it ended, for the student, and its kind."""
        if self.dead:
            return "is gone", Lost.GONE
        self.dead = True
        status = self._wait(grace)
        if status is None or status == -9:  # SIGKILL: stopped by the judge
            return "was stopped", Lost.STOPPED
        return describe_exit(status), Lost.CRASHED if status < 0 else Lost.EXITED

    def _read_pipe(self, pipe) -> None:
        while True:
            data = pipe.read1(1 << 16) if hasattr(pipe, "read1") else pipe.read(1 << 16)
            if not data:
                return
            self.output.add(data)

    def _wait(self, grace: float) -> int | None:
        self.chan.close()
        try:
            status = self.server.wait(self.pid, grace)
        except WorkerLost:
            status = None
        self._drain()
        return status

    def close(self) -> None:
        """A normal end: close the channel, let the worker exit, collect the last prints."""
        if not self.dead:
            self.dead = True
            self._wait(grace=0.0 if self.busy else 2.0)

    def _drain(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=0.5)
        end = time.monotonic() + 0.5
        while self.out is not None and time.monotonic() < end:
            if not select.select([self.out], [], [], max(0.0, end - time.monotonic()))[0]:
                break
            data = os.read(self.out, 1 << 16)
            if not data:
                break
            self.output.add(data)
        if self.out is not None:
            os.close(self.out)
            self.out = None


class LoadError(Exception):
    """The student's file failed to import in the worker; str() is the student message."""


def import_message(name: str, e: RemoteError, source: str | None = None) -> str:
    """What the student reads when their file failed to import. Where the worker holds reference code
    (grader.judge.withhold), nothing of the worker's own text: a syntax error is the judge's own compile of
    `source`, the student's file."""
    from grader.judge import withhold

    if withhold.active():
        withhold.hide("", "")  # the worker's message is left out whatever follows
        if e.type_name == "SyntaxError" and source is not None:
            try:
                compile(source, name, "exec", dont_inherit=True)
            except SyntaxError as own:
                return f"{name} has a syntax error at line {own.lineno}: {own.msg}"
            except (ValueError, MemoryError, RecursionError):
                pass
        if e.kind == "exit":
            return f"importing {name} called sys.exit(); remove top-level exits"
        return f"importing {name} raised {withhold.error_type(e.type_name)}{withhold.where(e.where)}; {withhold.NOTE}"
    if e.type_name == "SyntaxError":
        return f"{name} has a syntax error{e.where}: {e}"
    if e.kind == "exit":
        return f"importing {name} called sys.exit({e}); remove top-level exits"
    return f"importing {name} raised {e.type_name}: {e}{e.where}"


def describe_exit(status: int) -> str:
    if status < 0:
        return f"crashed with signal {-status} ({signal_name(-status)})"
    return f"exited early (exit code {status})"
