"""The parent's side of the judges' fork servers: a JudgeServer (grader.runner.judge_forkserver) and its Twin, each
asked for one judge at a time and waited for with a deadline (grader.runner.launch.run_piece reads what the judge wrote)."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.core import host
from grader.core.childenv import child_env
from grader.runner.results import Limits


class Stopped(Exception):
    """The run was told to stop (grader.runner.stops) while a piece ran: the piece has no result, and nothing is
    started in its place. Not an OSError: run_piece's fallback to a fresh interpreter never catches it."""


# a judge or a fork server that one of these ended was stopped from outside: the grader itself kills with SIGKILL
_STOPS = {-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT}


class JudgeServer:
    """The parent's side of a judges' fork server (grader.runner.judge_forkserver): one interpreter that imported torch,
    pytest and the judge's modules once, from which a judge is forked per piece; `run` asks it for one judge and waits
    for it with a deadline. `kill` ends it and its judge at once, for a run that stops: then every `run` raises
    Stopped."""

    def __init__(self) -> None:
        # the server dies with this process (its argument: whose death to watch for); `spare` is the channel of
        # the twin it may fork for a second lane (twin())
        spare, self.spare = socket.socketpair()
        self.proc = subprocess.Popen(host.python("grader.runner.judge_forkserver", str(os.getpid()),
                                                 "--twin", str(spare.fileno())),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     pass_fds=(spare.fileno(),), env=child_env(), cwd=tempfile.gettempdir())
        spare.close()
        self.buf = b""
        self.stopped = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def twin(self, trains: bool = False) -> Twin | None:
        """A second lane: a judges' server forked from this one once it is ready, with a workers' server forked
        from this one's (`trains`: which imports what training needs at once), so no second interpreter imports
        torch. None where this server cannot make one (it died, or made one already)."""
        channel, self.spare = self.spare, None
        if channel is None or not self.alive():
            return None
        try:
            self._send({"op": "twin", "trains": trains})
            reply = self._line(time.monotonic() + 120)
        except (EOFError, OSError, ValueError):
            reply = None
        if not reply or not reply.get("pid"):
            channel.close()
            return None
        return Twin(channel, reply["pid"])

    def _send(self, req: dict) -> None:
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()

    def _fd(self) -> int:
        return self.proc.stdout.fileno()

    def _line(self, deadline: float | None) -> dict | None:
        fd = self._fd()
        while b"\n" not in self.buf:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError("the judge_server exited")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def run(self, argv: list[str], cwd: str, key: str, output: Path, limits: Limits) -> tuple[int, str]:
        if self.stopped:
            raise Stopped("the run is stopping")
        try:
            code, status = self._run(argv, cwd, key, output, limits)
        except (EOFError, OSError, TypeError, ValueError):
            if self.stopped or self.signalled():
                raise Stopped("the judges' fork server was stopped") from None
            raise
        if self.stopped or code in _STOPS:
            raise Stopped("the judge was stopped")
        return code, status

    def signalled(self) -> bool:
        """Whether the server ended by SIGTERM or SIGINT from outside (a whole process group stopped)."""
        try:
            return self.proc.wait(timeout=1) in _STOPS
        except subprocess.TimeoutExpired:
            return False

    def _run(self, argv: list[str], cwd: str, key: str, output: Path, limits: Limits) -> tuple[int, str]:
        self._send({"argv": argv, "cwd": cwd, "key": key, "output": str(output), "memory_gb": limits.memory_gb})
        pid = self._line(time.monotonic() + 60)["pid"]
        done = self._line(time.monotonic() + limits.piece_timeout)
        if done is not None:
            return done["status"], "ok"
        if sys.platform == "win32":  # a judges' fork server runs only where host.FORK_SERVERS (Linux)
            raise host.StartError("no judges' fork server on Windows")
        try:
            os.killpg(pid, 9)  # SIGKILL: the judge's whole group
        except ProcessLookupError:
            pass
        self._line(None)
        return -9, "timeout"

    def kill(self) -> None:
        """End the server now; its judge and workers die with it (judge_forkserver), and no piece runs on it again."""
        self.stopped = True
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self) -> None:
        if self.spare is not None:
            self.spare.close()
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Twin(JudgeServer):
    """A judge_server's twin (JudgeServer.twin): the same requests and answers on a socket of its own. It is not this
    process's child, so its end shows as the socket's end of file; it dies with the server it was forked from."""

    def __init__(self, channel: socket.socket, pid: int) -> None:
        self.channel, self.pid, self.spare = channel, pid, None
        self.buf = b""
        self.stopped = self.gone = False

    def alive(self) -> bool:
        return not self.gone

    def twin(self, trains: bool = False) -> None:
        return None

    def signalled(self) -> bool:
        return False  # a whole process group stopped reaches the server it was forked from, whose run says so

    def _send(self, req: dict) -> None:
        try:
            self.channel.sendall((json.dumps(req) + "\n").encode())
        except OSError:
            self.gone = True
            raise

    def _fd(self) -> int:
        return self.channel.fileno()

    def _line(self, deadline: float | None) -> dict | None:
        try:
            return super()._line(deadline)
        except EOFError:
            self.gone = True
            raise

    def kill(self) -> None:
        self.stopped = True
        if sys.platform == "win32":  # a judges' fork server runs only where host.FORK_SERVERS (Linux)
            raise host.StartError("no judges' fork server on Windows")
        try:
            os.kill(self.pid, signal.SIGKILL)  # its judge dies with it; its workers' server at its socket's end
        except OSError:
            pass

    def close(self) -> None:
        self.channel.close()  # its end of file: the twin ends, and its workers' server after it
