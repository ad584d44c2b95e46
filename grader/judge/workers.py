"""The judge's side of one jailed worker: its process and socket, the calls that go over the wire to it and the
plain data that comes back, and its prints (`Output`). The processes that start workers are in
grader.judge.servers, the errors a call can end with in grader.judge.errors; both are named here too, where the
cases and the plots have always imported them from."""
from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from collections import deque
from typing import Callable

from grader.judge import cpuclock
from grader.judge.errors import LoadError, Lost, RemoteError, WorkerLost, describe_exit, import_message
from grader.judge.servers import SpawnedWorkers, WorkerServer, worker_server
from grader.worker import wire

__all__ = ["LoadError", "Lost", "Output", "RemoteError", "SpawnedWorkers", "Worker", "WorkerLost", "WorkerServer",
           "import_message", "worker_server"]

MAX_CALLBACKS = 20000  # questions one call may ask the judge's model (a greedy decode asks one per step)
OUTPUT_TAIL = 64 * 1024  # bytes of a piece's prints kept for the report
# seconds a deadline may be stretched by what a busy machine took from the worker (its threads' wait for a CPU):
# well inside pytest-timeout's backstop (THREAD_BACKSTOP) behind each case, so a hung worker still ends the case
STRETCH_CAP = 30.0


class Output:
    """The tail of what a piece's workers printed, bounded however much they print."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0  # bytes ever printed, kept or not: whether a call printed (grader/cases/test_context.py)
        self.lock = threading.Lock()

    def add(self, data: bytes) -> None:
        with self.lock:  # a spawned worker's prints arrive on a reader thread
            self.chunks.append(data)
            self.size += len(data)
            self.total += len(data)
            while self.size - len(self.chunks[0]) >= OUTPUT_TAIL:
                self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        with self.lock:
            return b"".join(self.chunks)[-OUTPUT_TAIL:].decode("utf-8", "replace")


class Worker:
    """One jailed worker process: requests go out, plain data comes back before the deadline."""

    def __init__(self, server: WorkerServer | SpawnedWorkers, output: Output, memory_gb: float, cpu_seconds: int,
                 trains: bool = False) -> None:
        self.server, self.output = server, output
        self.pid, self.chan, out = server.start(memory_gb, cpu_seconds, trains)
        self.fd = self.chan
        self.out: int | None = out if isinstance(out, int) else None
        self.reader: threading.Thread | None = None
        if isinstance(out, subprocess.Popen):  # no select on a Windows pipe: a thread drains it
            self.reader = threading.Thread(target=self._read_pipe, args=(out.stdout,), daemon=True)
            self.reader.start()
        self.dead = False
        self.busy = False
        self.jail: list[str] | None = None
        self.stretched = 0.0  # seconds the last request's deadline was stretched by (see `request`)

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

    def clock(self) -> cpuclock.Reading:
        """What the kernel has accounted to this worker so far (grader.judge.cpuclock)."""
        return cpuclock.read(self.pid)

    def recv(self, deadline: wire.Until) -> object:
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

    def request(self, req: dict, deadline: float, callbacks: Callable[[str, list, dict], object] | None = None,
                stretch: float = STRETCH_CAP) -> object:
        """Send one command and return its decoded value; callbacks answer the questions a remote model asks. The
        deadline moves by up to `stretch` seconds: what the machine kept the worker waiting for a CPU."""
        if self.dead:
            raise WorkerLost("is gone", Lost.GONE)
        self.hello(deadline)
        try:
            wire.send(self.fd, req)
        except OSError:
            raise WorkerLost(*self._end()) from None
        self.busy = True  # until its answer is in: a judge stopped meanwhile kills the worker, no grace
        asked = 0
        # what the machine takes from the worker while it works is given back: honest code on a busy machine is not
        # timed out, and a loop that never ends still is, once it has had its own time on a CPU
        waited = cpuclock.waited(self.pid)
        self.stretched = 0.0

        def stretched() -> float:
            # never less than granted already: a thread that exits takes its wait with it
            self.stretched = min(stretch, max(self.stretched, cpuclock.waited(self.pid) - waited))
            return deadline + self.stretched

        while True:
            reply = self.recv(stretched)
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
