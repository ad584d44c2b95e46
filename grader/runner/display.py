"""What a grading run tells the person watching it, shared by `grade` and the notebook's grading cells: the
seed it runs under, the training progress line, what a quick run leaves out, and the public release's note."""
from __future__ import annotations

import os
import threading
import time

from grader.runner import layout, manifest
from grader.runner.results import Limits

DEFAULT_SEED = "0"
PUBLIC_NOTE = ("Public smoke checks only: the graded cases are sealed in this release and run where the seal key is "
               "(your course's per-push grade, or your instructor's regrade). Passing these is not the grade.")


def resolve_seed(seed: str | None) -> str:
    """The hidden seed: given, else ATTNLAB_SEED, else the default."""
    return seed or os.environ.get("ATTNLAB_SEED") or DEFAULT_SEED


class TrainingDisplay:
    """Turns a training case's progress into one line, e.g. "decoder: training step 50/200, about 6 s left at the
    speed so far" (an estimate, not a bound: a busier machine slows it) (the validation accuracy at 30 words joins it where the case decoded: at its end), written at most every
    `every` seconds per piece and at the last step; or,
    `short`, into a progress bar's text holding every training piece's latest step."""

    def __init__(self, write, every: float = 5.0, short: bool = False) -> None:
        self.write, self.every, self.short, self.last = write, every, short, {}
        self.latest: dict[str, str] = {}
        self.lock = threading.Lock()

    def __call__(self, piece: str, event: dict) -> None:
        step, top, seconds = int(event["step"]), int(event["max_steps"]), event["seconds"]
        # an estimate, never a bound: the rate so far, which a busier machine slows; the stop rule may end it sooner
        left = (top - step) * seconds / max(step, 1)
        with self.lock:
            if self.short:  # a progress bar's text: every training piece at once, the latest of each
                acc = f", acc@30 {event['acc']:.2f}" if "acc" in event else ""
                self.latest[piece] = f"{piece} step {step}/{top}{acc}, ~{left:.0f} s left"
                self.write(" | ".join(self.latest.values()))
                return
            now = time.monotonic()
            if now - self.last.get(piece, -1e9) >= self.every or step >= top:
                self.last[piece] = now
                acc = f", validation accuracy at 30 words {event['acc']:.2f}" if "acc" in event else ""
                self.write(f"{piece}: training step {step}/{top}{acc}, about {left:.0f} s left at the speed so far")


def left_out(pieces: list[str], limits: Limits) -> tuple[int, int] | None:
    """(cases, points) a quick run leaves out of these pieces; None for a full run."""
    if not limits.quick:
        return None
    expected = manifest.read(layout.current().manifest)
    slow = [c for p in pieces for c in expected[p] if c.get("slow")]
    return (len(slow), sum(c["points"] for c in slow)) if slow else None
