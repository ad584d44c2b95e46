"""The objects a case calls on a jailed worker (grader.judge.workers runs it): build the student's modules
there, call them, read data back.

`CaseHandle` is what a case's `sub` fixture gives: `sub.new("EncoderAll", V, E, H)` builds the
student's class in the worker and returns a `Handle`; calling a handle runs the student's code
there and returns plain tensors, tuples, dicts and numbers. Student errors come back as
`RemoteError` (or NotImplementedError), a worker that dies or hangs as `WorkerLost`; the judge
keeps its deadline whatever the worker writes.
"""
from __future__ import annotations

import itertools
import time
from typing import Callable

import torch

from grader.judge import cpuclock
from grader.judge.errors import LoadError, Lost, RemoteError, WorkerLost, import_message
from grader.judge.servers import SpawnedWorkers, WorkerServer
from grader.judge.workers import STRETCH_CAP, Output, Worker
from grader.worker import wire


class Handle:
    """An object that lives in the worker: a module the student's class built, or a part of one."""

    def __init__(self, sub: CaseHandle, name: str) -> None:
        self.sub, self.name = sub, name

    def __call__(self, *args, **kwargs):
        return self.sub.run({"cmd": "call", "target": self.name, "method": None}, args, kwargs)

    def call(self, method: str, *args, keep: str | None = None, grad: bool = True, **kwargs):
        return self.sub.run({"cmd": "call", "target": self.name, "method": method, "keep": keep, "grad": grad}, args, kwargs)

    def probe(self, *args, method: str | None = None, **kwargs) -> dict:
        """Call the module (moved there first) or function on `args` on the worker's stand-in CUDA device
        (grader.worker.standin_cuda): {"values": the results as CPU tensors, "devices": where each one was}."""
        return self.sub.run({"cmd": "probe", "target": self.name, "method": method}, args, kwargs)

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

    def calls(self, *args, **kwargs) -> object:
        """How many torch functions and tensor methods the call on `args` makes, as the worker counts them (its reply:
        forgeable by the code it counts, so it may only ever fail a case)."""
        return self.sub.run({"cmd": "calls", "target": self.name, "method": None}, args, kwargs)

    def input_grads(self, *args, wrt: list[int]) -> list:
        """Call the module on `args` and return the gradients of its first output's sum of squares with respect
        to the arguments at the indices `wrt` (None where none reached one)."""
        return self.sub.run({"cmd": "input_grads", "target": self.name, "method": None, "wrt": list(wrt)}, args, {})

    def grads(self, prefix: str = "") -> dict:
        return self.sub.run({"cmd": "grads", "name": self.name, "prefix": prefix})

    def train_steps(self, cfg: dict, steps: int) -> int:
        return self.sub.run({"cmd": "train", "name": self.name, "cfg": cfg, "steps": steps})


class PieceWorker:
    """The place a piece's one worker is kept between its cases: the worker is started on first use, kept for the
    piece's next case, replaced once it dies, hangs or is stopped. A file that failed to import fails every later
    case with the same message."""

    def __init__(self, server: WorkerServer | SpawnedWorkers, sources: list[tuple[str, str]], student: str,
                 filename: str, output: Output, memory_gb: float, cpu_seconds: int,
                 lab: list[tuple[str, str]] = (), own: tuple[str, ...] = (), required: tuple[str, ...] = ()) -> None:
        self.server, self.sources, self.student, self.filename = server, sources, student, filename
        self.required = required  # jail layers without which the worker is sent nothing (see below)
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
            trains = any(name == "train" for name, _ in self.lab)  # the lab's training loop: torch.optim
            self.worker = Worker(self.server, self.output, self.memory_gb, self.cpu_seconds, trains)
            spent = time.monotonic() - start
            deadline += spent
            self.jail = self.worker.hello(deadline)
            lacking = [layer for layer in self.required if layer in self.jail]
            if lacking:  # a sealed run: without these layers graded code could read the key's file or the bundle
                self.worker.kill()
                raise WorkerLost(f"the worker jail on this machine lacks {' and '.join(lacking)}, which grading the "
                                 "sealed cases requires (graded code could read the seal key); run on a Linux "
                                 "kernel with Landlock (5.13 or newer) and seccomp", kind=Lost.SERVER)
            try:
                self.worker.request({"cmd": "load", "modules": self.sources, "student": self.student,
                                     "filename": self.filename, "seed": 0, "lab": self.lab, "own": self.own},
                                    deadline)
            except RemoteError as e:
                self.load_error = import_message(self.filename, e, self.sources[-1][1])
                raise LoadError(self.load_error) from None
        return self.worker, spent

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


class CaseHandle:
    """The student's file for one piece, as one case sees it: the piece's worker, reset and seeded for
    this case on first use, answering before this case's deadline."""

    def __init__(self, slot: PieceWorker, seed: int, deadline: float) -> None:
        self.slot, self.seed, self.deadline = slot, seed, deadline
        self.stretched, self.judge_waited = 0.0, cpuclock.waited("self")
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
        worker = self._worker()
        try:
            return worker.request(req, self.deadline, self.callbacks, stretch=STRETCH_CAP - self.stretched)
        finally:
            self._give_back(worker.stretched)

    def _give_back(self, worker_waited: float) -> None:
        """The case's deadline moved by what the machine took from the worker in the last request and from the judge
        since the case began (each thread's wait for a CPU), up to STRETCH_CAP in all: load never times a case out."""
        judge_waited = cpuclock.waited("self") - self.judge_waited
        self.judge_waited += judge_waited
        grant = min(worker_waited + judge_waited, STRETCH_CAP - self.stretched)
        self.stretched += grant
        self.deadline += grant

    @property
    def printed(self) -> int:
        """Bytes the piece's workers have printed so far (read as they arrive)."""
        return self.slot.output.total

    def clocked(self, req: dict, args: tuple = ()) -> tuple[object, float]:
        """A request's value and the CPU seconds its worker spent on it, as the kernel accounts them (not as the
        worker says: grader.judge.cpuclock)."""
        worker = self._worker()
        before = worker.clock()
        value = self.run(req, args)
        return value, cpuclock.spent(before, worker.clock())

    def new(self, cls: str, *args, **kwargs) -> Handle:
        name = f"m{next(self.names)}"
        self.run({"cmd": "new", "name": name, "cls": cls}, args, kwargs)
        return Handle(self, name)

    def fn(self, name: str) -> Handle:
        return Handle(self, f"@{name}")

    def ref(self, name: str) -> wire.Ref:
        """An argument naming a value kept in the worker ("out#0": the first item of what `keep="out"` kept)."""
        return wire.Ref(name)

    def backward(self, kept: str, rows: bool = False) -> None:
        """Backward from the kept value's sum of squares (rows=True: of its log-softmax over the last dimension, the
        same for logits shifted by a constant in each row)."""
        self.run({"cmd": "backward", "name": kept, "rows": rows})

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
