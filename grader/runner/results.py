"""What a grade is made of: the limits a run works under, and each case's and piece's result."""
from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class PieceRun:
    name: str
    cases: list[CaseResult]
    output: str = ""
    seconds: float = 0.0
    status: str = "ok"  # ok | timeout | crashed | exited
    jail: list[str] = field(default_factory=list)  # jail layers this machine could not put up
    withheld: str = ""  # why the piece's printed output and messages are withheld (grader.judge.sources.withheld)
