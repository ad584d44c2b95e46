"""Options the `grade` command's verbs share: the grading options of `grade` (check) and `grade batch`."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from grader.runner.results import Limits



def measured_training() -> str:
    """": 4.5 s of a full grade's 7.9 s, measured on ..." from the record (grader/core/measured.json), or ""."""
    from grader.core import measured

    training, full = measured.seconds("grade_training"), measured.seconds("grade_full")
    return f": {training} of a full grade's {full}, measured {measured.where('grade_full')}" if training else ""

def _seal_key(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    from grader.runner import sealing

    if value != "-":
        _beyond_the_jail(Path(value))
    try:
        data = sys.stdin.buffer.read() if value == "-" else Path(value).read_bytes()
    except OSError as e:
        raise click.BadParameter(f"cannot read {value}: {e.strerror}", param_hint="--seal-key-file") from None
    sealing.take_key(data)


def _beyond_the_jail(path: Path) -> None:
    """Refuse a key file inside a folder the workers' jail lets graded code read (the interpreter's own folders,
    /usr, /lib: grader.worker.worker_forkserver.readable_paths): Landlock would let any submission read the key there."""
    import os

    from grader import ROOT
    from grader.worker.worker_forkserver import readable_paths

    real = os.path.realpath(path)
    under = [p for p in readable_paths(ROOT) if real == p or real.startswith(p.rstrip(os.sep) + os.sep)]
    if under:
        raise click.BadParameter(f"{path} lies in {under[0]}, which graded code may read; keep the key where it cannot "
                                 "(/etc/attnlab/seal-key, readable by you alone)", param_hint="--seal-key-file")


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # binary, as staging.DISK_BYTES counts


def parse_size(text: str) -> int:
    """'4G', '500M', '1.5GB', '2048' (bytes) -> bytes; ValueError for anything else, or for nothing at all."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a size: write a number and a unit, e.g. 4G or 500M")
    size = int(float(match[1]) * _UNITS[match[2].upper()])
    if size <= 0:
        raise ValueError(f"{text!r} is no room at all: give a size above zero, e.g. 4G")
    return size


def size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def grading_options(command):
    """--seed, the limits and --quick: the same for one submission (`check`) and a class (`batch`)."""
    options = [
        click.option("--seed", default=None,
                     help="Hidden seed for the cases' random inputs (or ATTNLAB_SEED); instructors rotate it."),
        click.option("--case-timeout", type=float, default=Limits.case_timeout, show_default=True,
                     help="Seconds one case may run."),
        click.option("--piece-timeout", type=float, default=Limits.piece_timeout, show_default=True,
                     help="Seconds one piece's process may run."),
        click.option("--memory-gb", type=float, default=Limits.memory_gb, show_default=True,
                     help="Address-space cap of each piece's process."),
        click.option("--quick", is_flag=True, help="Leave out the two slow training cases (decoder's and luong's, "
                     f"side by side{measured_training()}): not a grade, a faster check while you work."),
        click.option("--seal-key-file", default=None, expose_value=False, callback=_seal_key, is_eager=True,
                     help="Read the key of grader/sealed.bin from this file ('-': standard input) instead of "
                          "ATTNLAB_SEAL_KEY; either way no graded code can read it."),
    ]
    for option in reversed(options):  # applied bottom-up, so --help lists them in this order
        command = option(command)
    return command
