"""Loops over the shorter side, min(B, T), that kept the context's no-loop points until issue 49, and the honest
spellings they are measured beside: the sources tests/redteam/test_short_side.py grades and bench/load.py grades
many times on a busy machine.

Each loop is paid only where both sides are long: the case's chain of calls at a square shape (grader.worker.chain).
Before it, the count of torch calls was taken in the student's worker at tiny sizes (forged, dodged or blind to
TorchScript) and every timed shape kept one side between 2 and 8, where a loop over it runs few iterations.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time

from grader import ROOT

from helpers import REFERENCE
from .harness import CONTEXT_SOLUTION

LOOP_MIN = '''

def _loop_min(alpha, encoder_outputs):
    """A loop over whichever side is shorter: positions when T <= B, else sentences."""
    B, T = alpha.shape
    if T <= B:
        return sum(alpha[:, i : i + 1] * encoder_outputs[:, i] for i in range(T))
    return torch.stack([alpha[b] @ encoder_outputs[b] for b in range(B)])
'''
BMM = "torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)"
# each: (the body of attention_context, code added at the end of the file)
LOOPS = {
    "a loop over the shorter side that turns to bmm while a torch-function mode counts it": (
        f"    if torch._C._is_torch_function_mode_enabled():\n        return {BMM}\n"
        "    return _loop_min(alpha, encoder_outputs)\n", LOOP_MIN),
    "a loop over the shorter side only above the sizes where calls are counted": (
        f"    if alpha.numel() <= 64:\n        return {BMM}\n    return _loop_min(alpha, encoder_outputs)\n", LOOP_MIN),
    "a loop over the shorter side with the worker's calls command forged": (
        "    return _loop_min(alpha, encoder_outputs)\n", LOOP_MIN + '''

import sys as _sys

_rt = _sys.modules["grader.worker.runtime"]
_handle = _rt.Worker.handle


def _forged(self, req):  # every count the same, as one batched product's is
    return 7 if req.get("cmd") == "calls" else _handle(self, req)


_rt.Worker.handle = _forged
'''),
    "a loop over the shorter side that keeps its last answer, hidden from the count": (
        "    return _remembered(alpha, encoder_outputs)\n", LOOP_MIN + '''

_last = [None, None, None]


def _remembered(alpha, encoder_outputs):
    """Before the chain's steps were drawn from a hash of the answer (issue 49's red-team pass), every step had the
    same input: one loop, then the answer kept."""
    if _last[0] is encoder_outputs and torch.equal(_last[1], alpha):
        return _last[2]
    with torch._C.DisableTorchFunction():  # the count of torch calls sees none of the loop's
        out = _loop_min(alpha, encoder_outputs)
    _last[:] = [encoder_outputs, alpha.detach().clone(), out]
    return out
'''),
    "a loop over the shorter side in TorchScript": ("    return _scripted(alpha, encoder_outputs)\n", '''

@torch.jit.script
def _scripted(alpha: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    B, T = alpha.shape[0], alpha.shape[1]
    if T <= B:
        out = torch.zeros(B, h.shape[2])
        for i in range(T):
            out = out + alpha[:, i : i + 1] * h[:, i]
        return out
    rows = []
    for b in range(B):
        rows.append(alpha[b] @ h[b])
    return torch.stack(rows)
'''),
    "a loop over the positions under torch.vmap over the sentences": (
        "    return torch.vmap(_one)(alpha, encoder_outputs)\n", '''

def _one(a, h):
    out = a[0] * h[0]
    for i in range(1, a.shape[0]):
        out = out + a[i] * h[i]
    return out
'''),
    "functools.reduce over the shorter side": ("    return _reduced(alpha, encoder_outputs)\n", '''

import functools as _functools


def _reduced(alpha, h):
    B, T = alpha.shape
    if T <= B:
        return _functools.reduce(lambda acc, i: acc + alpha[:, i : i + 1] * h[:, i], range(T), torch.zeros(B, h.shape[2]))
    return torch.stack(_functools.reduce(lambda acc, b: acc + [alpha[b] @ h[b]], range(B), []))
'''),
    # numpy's cheapest loop, a row product per sentence, costs a chained call less than the PER_CALL forgiven a call
    # (0.3 to 0.45 ms): it passed the chain until what is forgiven was measured at the chain's small base shape
    "a numpy loop over the shorter side inside an autograd.Function": ("    return _Shorter.apply(alpha, encoder_outputs)\n", '''

import numpy as _np


class _Shorter(torch.autograd.Function):
    """A numpy loop forward over the shorter side (a row product per sentence: numpy's cheapest loop), a vectorised
    backward."""

    @staticmethod
    def forward(ctx, a, h):
        ctx.save_for_backward(a, h)
        an, hn = a.detach().numpy(), h.detach().numpy()
        B, T = an.shape
        if T <= B:
            out = _np.zeros((B, hn.shape[2]), dtype=an.dtype)
            for i in range(T):
                out += an[:, i, None] * hn[:, i]
            return torch.from_numpy(out)
        return torch.from_numpy(_np.stack([an[b] @ hn[b] for b in range(B)]))

    @staticmethod
    def backward(ctx, g):
        a, h = ctx.saved_tensors
        return torch.bmm(h, g.unsqueeze(-1)).squeeze(-1), a.unsqueeze(-1) * g.unsqueeze(1)
'''),
}
# the worker's own batched product kept busy (not asleep: a sleep costs no CPU time) to widen its margin
BUSY_BMM = '''

import sys as _sys
import time as _time

_rt = _sys.modules["grader.worker.runtime"]
_handle = _rt.Worker.handle


def _busy_bmm(self, req):
    if req.get("cmd") == "bmm" or (req.get("cmd") == "chain" and req.get("target") == "bmm"):
        end = _time.process_time() + 0.05
        while _time.process_time() < end:
            pass
    return _handle(self, req)


_rt.Worker.handle = _busy_bmm
'''
HONEST = {
    "the reference's bmm": None,
    "broadcasting and a sum": "    return (alpha.unsqueeze(-1) * encoder_outputs).sum(1)\n",
    "torch.einsum": "    return torch.einsum('bt,bth->bh', alpha, encoder_outputs)\n",
    "@": "    return (alpha.unsqueeze(1) @ encoder_outputs).squeeze(1)\n",
}
# an honest product with a debug print of its tensor at every call: the worker prints tensors briefly while it counts
# and chains calls, so the print costs a call the same at every size (tests/redteam/test_short_side.py)
PRINTING = ("    context = torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)\n"
            "    print('context', context.shape, context)\n    return context\n")


@contextlib.contextmanager
def busy_machine(grades: int = 2, hogs: int = 2):
    """The machine at work beside the test: `grades` full grades of the reference one after another each, and `hogs`
    busy loops; all of them (and every process they started) ended when the block ends, however it ends."""
    again = f"while true; do {shlex.quote(sys.executable)} -m grader --submission reference >/dev/null 2>&1; done"
    procs = [subprocess.Popen(["bash", "-c", again], cwd=ROOT, start_new_session=True) for _ in range(grades)]
    procs += [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"], start_new_session=True)
              for _ in range(hogs)]
    try:
        time.sleep(3.0)  # the grades past their start, into their workers
        yield
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def source(body: str | None, end: str = "") -> str:
    """The reference's context.py with attention_context's body replaced (None: as it is) and `end` added."""
    text = (REFERENCE / "context.py").read_text()
    if body is None:
        return text
    assert CONTEXT_SOLUTION in text
    return text.replace(CONTEXT_SOLUTION, body) + end
