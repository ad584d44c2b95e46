"""The processes that start a judge's workers: the fork server (grader.worker.worker_forkserver) on Linux, inherited from
the parent or started here, or, without fork (Windows, macOS), a fresh interpreter per worker."""
from __future__ import annotations

import itertools
import json
import os
import secrets
import select
import socket
import subprocess
import sys
import tempfile
import time

from grader.core import host
from grader.judge.errors import Lost, WorkerLost


class WorkerServer:
    """The judge's connection to grader.worker.worker_forkserver, started here when no descriptor was inherited (Linux)."""

    def __init__(self, fd: int | None = None) -> None:
        self.proc = None
        if fd is None:
            mine, theirs = socket.socketpair()
            from grader.core.childenv import worker_env

            self.proc = subprocess.Popen(host.python("grader.worker.worker_forkserver", str(theirs.fileno())),
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=worker_env(), cwd=tempfile.gettempdir())
            theirs.close()
            self.sock = mine
        else:
            self.sock = socket.socket(fileno=fd)
        self.ids = itertools.count(int(time.time() * 1000) % 10**9)
        self.buf = b""

    def start(self, memory_gb: float, cpu_seconds: int, trains: bool = False) -> tuple[int, socket.socket, int | None]:
        """A new jailed worker: (pid, its channel, the read end of its output pipe); `trains`: one that will train."""
        chan, theirs = socket.socketpair()
        r, w = os.pipe()
        try:
            reply = self.ask({"op": "spawn", "memory_gb": memory_gb, "cpu_seconds": cpu_seconds, "trains": trains},
                             [theirs.fileno(), w])
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
        if sys.platform == "win32":  # worker_server() starts a fork server only where host.FORK_SERVERS (Linux)
            raise WorkerLost("no workers' fork server on Windows", kind=Lost.SERVER)
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

    def start(self, memory_gb: float, cpu_seconds: int,
              trains: bool = False) -> tuple[int, socket.socket, subprocess.Popen]:
        from grader.core.childenv import worker_env

        token = secrets.token_hex(16)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            try:
                proc = subprocess.Popen(host.python("grader.worker.worker_forkserver", "--connect", str(listener.getsockname()[1])),
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
