"""What a grade is made of: the limits a run works under, and each case's and piece's result."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from grader.worker import limits as defaults


@dataclass
class Limits:
    """Per-case and per-piece limits; the defaults (grader.worker.limits) leave room for the length-30 training case."""

    case_timeout: float = defaults.CASE_TIMEOUT  # a case takes well under a second; the training case has its own limit
    piece_timeout: float = defaults.PIECE_TIMEOUT
    memory_gb: float = defaults.MEMORY_GB
    quick: bool = False  # leave out the slow (training) cases


@dataclass
class CaseResult:
    name: str
    points: int
    passed: bool
    message: str
    skipped: bool = False
    duration: float = 0.0


class Status(str, Enum):
    """How a piece's judge ended (a str, so a report writes it as its value)."""

    OK = "ok"  # it ran to its end (whatever its cases found)
    TIMEOUT = "timeout"  # stopped at the piece's time limit
    CRASHED = "crashed"  # ended by a signal
    EXITED = "exited"  # exited with an unexpected code once every case it reported had passed

    def __str__(self) -> str:
        return self.value


@dataclass
class PieceRun:
    name: str
    cases: list[CaseResult]
    output: str = ""
    seconds: float = 0.0
    status: Status = Status.OK
    jail: list[str] = field(default_factory=list)  # jail layers this machine could not put up
    withheld: str = ""  # why the piece's printed output and messages are withheld (grader.judge.sources.withheld)
