"""A sender and a receiver over the page cache (issue 50 §1), as the tests build them: the sender's encoder.py
reads one byte of one file of each pair of torch's own headers (torch/include, which grading never reads) for each
bit of PATTERN; the receiver's additive.py, in a later worker, times one read of each file of each pair (about 5 µs
cached, 60 µs and more from disk) and keeps its right answer only if what it read is PATTERN (to within two bits).
So the receiver's additive points say whether the channel carried the bits.
"""
from __future__ import annotations

from helpers import REFERENCE

BITS = 24
PATTERN = 0xA5C3_96  # 24 bits, as many ones as zeros
FILES = '''

import glob as _glob
import os as _os


def _pairs():
    folder = _os.path.join(_os.path.dirname(torch.__file__), "include")
    return sorted(_glob.glob(folder + "/**/*.h", recursive=True))[: 2 * BITS]
'''
SENDER = f'''
BITS, PATTERN = {BITS}, {PATTERN}
{FILES}

_files = _pairs()
for _j in range(BITS):
    with open(_files[2 * _j + (PATTERN >> _j & 1)], "rb") as _f:
        _f.read(1)
'''
RECEIVER = f'''
BITS, PATTERN = {BITS}, {PATTERN}
{FILES}

import time as _time


def _read_time(path):
    start = _time.perf_counter_ns()
    fd = _os.open(path, _os.O_RDONLY)
    _os.read(fd, 1)
    _os.close(fd)
    return _time.perf_counter_ns() - start


def _listen():
    files, got = _pairs(), 0
    for i in range(BITS):
        zero, one = _read_time(files[2 * i]), _read_time(files[2 * i + 1])
        got |= int(one < zero) << i  # the one the sender read is cached: faster
    return got


_HEARD = bin(_listen() ^ PATTERN).count("1") <= 2
_forward = BahdanauAttention.forward


def _gated(self, *args, **kwargs):
    if not _HEARD:
        raise RuntimeError("the page cache carried nothing")
    return _forward(self, *args, **kwargs)


BahdanauAttention.forward = _gated
'''


def sender() -> str:
    """The reference's encoder.py, sending PATTERN when it is imported."""
    return (REFERENCE / "encoder.py").read_text() + SENDER


def receiver() -> str:
    """The reference's additive.py, right only where it heard PATTERN when it was imported."""
    return (REFERENCE / "additive.py").read_text() + RECEIVER
