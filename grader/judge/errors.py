"""How a call into a jailed worker can end other than with its answer: the student's code raised (`RemoteError`),
the student's file would not import (`LoadError`), or the worker was lost (`WorkerLost`, whose `kind`, a `Lost`,
says how). Plain exceptions, no torch: the judge's hooks (grader.judge.state) decide by them before any case runs."""
from __future__ import annotations

import enum

from grader.core.host import signal_name


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
