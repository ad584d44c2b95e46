"""Judge-side handles on a jailed worker: build the student's modules there, call them, read data back.

`Submission` is what a case's `sub` fixture gives: `sub.new("EncoderAll", V, E, H)` builds the
student's class in the worker and returns a `Handle`; calling a handle runs the student's code
there and returns plain tensors, tuples, dicts and numbers. Student errors come back as
`RemoteError` (or NotImplementedError), a worker that dies or hangs as `WorkerLost`; the judge
keeps its deadline whatever the worker writes.
"""
from __future__ import annotations

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
from pathlib import Path
from typing import Callable

import torch

from grader import host
from grader.runner.launch import signal_name
from grader.worker import wire

MAX_CALLBACKS = 20000  # questions one call may ask the judge's model (a greedy decode asks one per step)
OUTPUT_TAIL = 64 * 1024  # bytes of a piece's prints kept for the report


class RemoteError(Exception):
    """Student code raised; the type name, first line and place in the student's file came back as data."""

    def __init__(self, kind: str, type_name: str, message: str, where: str) -> None:
        super().__init__(message)
        self.kind, self.type_name, self.where = kind, type_name, where


class WorkerLost(Exception):
    """The worker died, hung past the deadline or sent something that is not data; str() says which."""

    def __init__(self, message: str, timed_out: bool = False, server: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.server = server  # the workers' fork server failed, not the student's code


class WorkerServer:
    """The judge's connection to grader.worker.forkserver, started here when no descriptor was inherited (Linux)."""

    def __init__(self, fd: int | None = None) -> None:
        self.proc = None
        if fd is None:
            mine, theirs = socket.socketpair()
            from grader.runner.launch import worker_env

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
            raise WorkerLost(f"the worker server {reply.get('error', 'started no worker')}", server=True)
        return reply["pid"], chan, r

    def wait(self, pid: int, grace: float) -> int | None:
        return self.ask({"op": "wait", "pid": pid, "grace": grace}).get("status")

    def ask(self, req: dict, fds: list[int] = (), timeout: float = 120.0) -> dict:
        req = {**req, "id": next(self.ids)}
        try:
            socket.send_fds(self.sock, [(json.dumps(req) + "\n").encode()], list(fds))
        except OSError as e:
            raise WorkerLost(f"the worker server is gone ({e.strerror})", server=True) from None
        end = time.monotonic() + timeout
        while True:
            while b"\n" not in self.buf:
                wait = end - time.monotonic()
                if wait <= 0 or not select.select([self.sock], [], [], wait)[0]:
                    raise WorkerLost("the worker server did not answer; is the machine overloaded?", server=True)
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise WorkerLost("the worker server exited", server=True)
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
        from grader.runner.launch import worker_env

        token = secrets.token_hex(16)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            try:
                proc = subprocess.Popen(host.python("grader.worker.forkserver", "--connect", str(listener.getsockname()[1])),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        env=worker_env(), cwd=tempfile.gettempdir())
            except OSError as e:
                raise WorkerLost(f"a worker could not start ({e.strerror or e})", server=True) from None
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
                                 server=True)
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
        raise WorkerLost("a worker did not start in time; is the machine overloaded?", server=True)

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
            raise WorkerLost("timed out", timed_out=True) from None
        except wire.Closed:  # it is ending: give it a moment to say how
            raise WorkerLost(self.kill(grace=0.5)) from None
        except (wire.WireError, MemoryError) as e:
            self.kill()
            raise WorkerLost(f"sent {e or 'an answer too large to open'}") from None

    def hello(self, deadline: float) -> list[str]:
        if self.jail is None:
            msg = self.recv(deadline)
            self.jail = [str(x) for x in msg.get("jail", [])] if isinstance(msg, dict) else ["unknown"]
        return self.jail

    def request(self, req: dict, deadline: float, callbacks: Callable[[str, list, dict], object] | None = None) -> object:
        """Send one command and return its decoded value; callbacks answer the questions a remote model asks."""
        if self.dead:
            raise WorkerLost("is gone")
        self.hello(deadline)
        try:
            wire.send(self.fd, req)
        except OSError:
            raise WorkerLost(self.kill()) from None
        self.busy = True  # until its answer is in: a judge stopped meanwhile kills the worker, no grace
        asked = 0
        while True:
            reply = self.recv(deadline)
            if not isinstance(reply, dict):
                self.kill()
                raise WorkerLost("sent an answer that is not a record")
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
                    raise WorkerLost(f"sent {e}") from None
            err = reply.get("error")
            if not isinstance(err, dict):
                self.kill()
                raise WorkerLost("sent a malformed error")
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
        if self.dead:
            return "is gone"
        self.dead = True
        status = self._wait(grace)
        if status is None or status == -9:  # SIGKILL: stopped by the judge
            return "was stopped"
        return describe_exit(status)

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


def import_message(name: str, e: RemoteError) -> str:
    if e.type_name == "SyntaxError":
        return f"{name} has a syntax error{e.where}: {e}"
    if e.kind == "exit":
        return f"importing {name} called sys.exit({e}); remove top-level exits"
    return f"importing {name} raised {e.type_name}: {e}{e.where}"


def describe_exit(status: int) -> str:
    if status < 0:
        return f"crashed with signal {-status} ({signal_name(-status)})"
    return f"exited early (exit code {status})"


class Handle:
    """An object that lives in the worker: a module the student's class built, or a part of one."""

    def __init__(self, sub: Submission, name: str) -> None:
        self.sub, self.name = sub, name

    def __call__(self, *args, **kwargs):
        return self.sub.run({"cmd": "call", "target": self.name, "method": None}, args, kwargs)

    def call(self, method: str, *args, keep: str | None = None, grad: bool = True, **kwargs):
        return self.sub.run({"cmd": "call", "target": self.name, "method": method, "keep": keep, "grad": grad}, args, kwargs)

    def part(self, path: str) -> Handle:
        return Handle(self.sub, f"{self.name}.{path}")

    def load(self, state: dict, strict: bool = True):
        """Load parameters; with strict=False only some of them, returning the names the module lacks."""
        return self.sub.run({"cmd": "load_state", "name": self.name, "state": wire.encode(dict(state)), "strict": strict})

    def state(self) -> dict:
        """The module's state_dict (tensors on the wire: decode_safe checked each is a dense, plain tensor)."""
        return self.sub.run({"cmd": "state", "name": self.name})

    def to(self, device: str) -> Handle:
        self.sub.run({"cmd": "to", "name": self.name, "device": device})
        return self

    def input_grads(self, *args, wrt: list[int]) -> list:
        """Call the module on `args` and return the gradients of its first output's sum of squares with respect
        to the arguments at the indices `wrt` (None where none reached one)."""
        return self.sub.run({"cmd": "input_grads", "target": self.name, "method": None, "wrt": list(wrt)}, args, {})

    def grads(self, prefix: str = "") -> dict:
        return self.sub.run({"cmd": "grads", "name": self.name, "prefix": prefix})

    def train_steps(self, cfg: dict, steps: int) -> int:
        return self.sub.run({"cmd": "train", "name": self.name, "cfg": cfg, "steps": steps})


class Slot:
    """The one worker of a piece: started on first use, kept for the piece's next case, replaced once it dies,
    hangs or is stopped. A file that failed to import fails every later case with the same message."""

    def __init__(self, server: WorkerServer | SpawnedWorkers, sources: list[tuple[str, str]], student: str,
                 filename: str, output: Output, memory_gb: float, cpu_seconds: int,
                 lab: list[tuple[str, str]] = (), own: tuple[str, ...] = ()) -> None:
        self.server, self.sources, self.student, self.filename = server, sources, student, filename
        self.lab, self.own = list(lab), list(own)
        self.output, self.memory_gb, self.cpu_seconds = output, memory_gb, cpu_seconds
        self.worker: Worker | None = None
        self.load_error: str | None = None
        self.jail: list[str] = []

    def get(self, deadline: float) -> tuple[Worker, float]:
        """The live worker, and the seconds spent starting a new one (a fresh interpreter without fork), which
        the case gets back: no student code ran meanwhile."""
        if self.load_error is not None:
            raise LoadError(self.load_error)
        spent = 0.0
        if self.worker is None or self.worker.dead:
            start = time.monotonic()
            self.worker = Worker(self.server, self.output, self.memory_gb, self.cpu_seconds)
            spent = time.monotonic() - start
            deadline += spent
            self.jail = self.worker.hello(deadline)
            try:
                self.worker.request({"cmd": "load", "modules": self.sources, "student": self.student,
                                     "filename": self.filename, "seed": 0, "lab": self.lab, "own": self.own},
                                    deadline)
            except RemoteError as e:
                self.load_error = import_message(self.filename, e)
                raise LoadError(self.load_error) from None
        return self.worker, spent

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


class Submission:
    """The student's file for one piece, as one case sees it: the piece's worker, reset and seeded for
    this case on first use, answering before this case's deadline."""

    def __init__(self, slot: Slot, seed: int, deadline: float) -> None:
        self.slot, self.seed, self.deadline = slot, seed, deadline
        self.started = False
        self.names = itertools.count()
        self.callbacks: Callable | None = None

    @property
    def jail(self) -> list[str]:
        return self.slot.jail

    @property
    def source(self) -> str:
        """The student's file as the judge read it (the text the worker was sent)."""
        return self.slot.sources[-1][1]

    def _worker(self) -> Worker:
        worker, spent = self.slot.get(self.deadline)
        self.deadline += spent
        if not self.started:  # a clean slate for every case: nothing kept, the case's own seed
            self.started = True
            worker.request({"cmd": "reset", "seed": self.seed}, self.deadline)
        return worker

    def run(self, req: dict, args: tuple = (), kwargs: dict | None = None) -> object:
        if args or kwargs:
            req = {**req, "args": wire.encode(list(args)), "kwargs": wire.encode(dict(kwargs or {}))}
        return self._worker().request(req, self.deadline, self.callbacks)

    def new(self, cls: str, *args, **kwargs) -> Handle:
        name = f"m{next(self.names)}"
        self.run({"cmd": "new", "name": name, "cls": cls}, args, kwargs)
        return Handle(self, name)

    def fn(self, name: str) -> Handle:
        return Handle(self, f"@{name}")

    def ref(self, name: str) -> wire.Ref:
        """An argument naming a value kept in the worker ("out#0": the first item of what `keep="out"` kept)."""
        return wire.Ref(name)

    def backward(self, kept: str) -> None:
        self.run({"cmd": "backward", "name": kept})

    def ops(self, target: Handle, *args) -> int:
        return self.run({"cmd": "ops", "target": target.name, "method": None}, args)

    def seed_worker(self, seed: int) -> None:
        self.run({"cmd": "seed", "seed": seed})

    def close(self) -> None:
        """The case is over: a worker still busy with it (stopped by a timeout) is killed, not reused."""
        worker = self.slot.worker
        if self.started and worker is not None and worker.busy:
            worker.kill()


class RemoteSeq2Seq:
    """The judge's view of a student's Seq2SeqAttn in a worker, enough for grader.lab.evaluate's greedy decoding.

    Every decoder step's answer is checked here before the evaluator counts it: logits (B, vocab) of
    floats and alpha (B, T_src). Logits of another shape would broadcast against the gold tokens and
    count one guess against many answers."""

    training = False

    def __init__(self, handle: Handle, vocab: int) -> None:
        self.handle = handle
        self.vocab = vocab
        self.shape: tuple[int, int] = (0, 0)  # (B, T_src) of the batch being decoded
        self.decoder = _Decoder(self)

    def encoder(self, src: torch.Tensor):
        """(outputs, (h, c)); the outputs stay in the worker (a Ref): each decoder step would resend them."""
        self.shape = tuple(src.shape)
        out = self.handle.part("encoder").call("__call__", src, grad=False, keep="encoded")
        if isinstance(out, tuple) and len(out) == 2:
            return wire.Ref("encoded#0"), out[1]
        return out

    def eval(self) -> RemoteSeq2Seq:
        self.handle.call("eval")
        return self

    def train(self, mode: bool = True) -> RemoteSeq2Seq:
        self.handle.call("train", mode)
        return self

    def parameters(self):
        yield torch.zeros(0)


class _Decoder:
    def __init__(self, model: RemoteSeq2Seq) -> None:
        self.model = model

    def forward_step(self, *args):
        out = self.model.handle.part("decoder").call("forward_step", *args, grad=False)
        B, T = self.model.shape
        if not (isinstance(out, tuple) and len(out) == 3):
            raise ValueError(f"forward_step returned {type(out).__name__}, not (logits, state, alpha)")
        logits, _, alpha = out
        for name, value, shape in (("logits", logits, (B, self.model.vocab)), ("alpha", alpha, (B, T))):
            if not (isinstance(value, torch.Tensor) and value.is_floating_point() and tuple(value.shape) == shape):
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"forward_step's {name} is {got}; it must be a float tensor of shape {shape}")
        return out


def lab_sources(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """The text of the lab's own modules a piece's worker needs (grader/lab/<name>.py, in the order given): workers
    import no lab module of their own, so none holds code that computes another piece's answer."""
    here = Path(__file__).resolve().parent.parent / "lab"
    return [(name, (here / f"{name}.py").read_text(encoding="utf-8")) for name in names]


def relative_imports(source: str) -> set[str]:
    """The lab modules a file imports relatively (`from .additive import ...` -> {"additive"})."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return found


def student_sources(submission: Path, reference: Path | None, stem: str, order: list[str],
                    stubbed: bool = False) -> list[tuple[str, str]]:
    """What a worker loads: the student's file for `stem` last, and before it, in dependency order, only
    the lab modules it imports and what those import in turn: the reference's (their stubs where
    `stubbed`), or the student's own in public mode. Only regular files are read."""
    from grader.lesson.stubs import stub_source

    def read(path: Path) -> str | None:
        if not path.is_file() or path.is_symlink():
            return None
        return path.read_text(encoding="utf-8", errors="replace")

    base = reference if reference is not None else submission
    own = read(submission / f"{stem}.py") or ""
    earlier = order[: order.index(stem)]
    texts: dict[str, str] = {}
    todo = [m for m in relative_imports(own) if m in earlier]
    while todo:
        other = todo.pop()
        if other in texts:
            continue
        text = read(base / f"{other}.py")
        if text is None:
            continue
        texts[other] = text
        todo += [m for m in relative_imports(text) if m in earlier]
    out = [(m, stub_source(texts[m], m) if stubbed and reference is not None else texts[m]) for m in order if m in texts]
    return out + [(stem, own)]
