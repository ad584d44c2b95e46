"""Loops over positions or sentences in every spelling: the context's no-loop points are paid from behaviour, never
from the source.

The case (test_it_runs_no_python_loop_over_positions, 2 points) first checks the values and that the gradients with
respect to alpha and the encoder outputs are the reference's (one differentiable function of both), then measures,
in the CPU time the kernel accounts to the worker (grader/judge/cpuclock.py; issue 49: the judge's wall clock let a
busy machine take honest code's points), calls on fresh inputs at three probes drawn from the hidden seed: a few long
sentences (2 to 4 of 48000 to 80000 positions) and many short ones (24000 to 40000 of 4 to 8), H 2 to 4, one call
each; and a chain of 48 calls at a square shape (192 to 256 each side, H 1), each call's input drawn from the answer
before it (grader/worker/chain.py), where a loop over the shorter side pays (tests/redteam/test_short_side.py), less
what the same chain cost the student's code beyond bmm's at a small square base shape (24 to 40 each side: checks or a
debug print, which cost a call the same at every size; up to 0.5 ms a call, 2 ms where it printed). Each
probe is measured beside a run of the same work by the worker's own batched product (its trusted `bmm` and
`chain` commands: the same bytes on the wire), and every answer is checked. So a loop hidden from a reading of the
text (map and reduce, `while True` and numpy, a decoy def of the same name, `attention_context = _impl`), a loop over
the sentences, a loop on Python floats and code that loops but at the sizes the probe used to use pay like any other
loop, and a vectorised answer in any spelling keeps the points.

What the limits were chosen from (grader/cases/test_context.py), the figure after the first round, on this project's
2-core machine (AMD EPYC), CPU time: the honest spellings (bmm, einsum, matmul, @, broadcasting and a sum) measured
0.7 to 1.4 at the single-call probes and 1.0 to 2.0 at the chain (bmm with a print of its tensor at every call the
highest); a loop over the shorter side measured 6.1 (numpy's row products, the cheapest loop found) to 21 at the chain; the loops below lose at the single-call probes as they did
on the wall clock (a loop over the sentences 14 to 43 times bmm at the short probe, torch loops over the positions
43 to 85 or the 2.5 s limit at the long one). Limits (pass below, fail above, measured again in between, for at most
4 rounds on the minimum of all calls so far, then the middle decides): 2 / 3 / 8 times bmm's time, 2 / 4 / 8 at the
chain. bench/load.py
grades every source here and in short_side.py 20 times beside two other full grades and busy loops
(docs/performance.md has its counts).

bmm's time counts for at most 4 times the judge's own CPU time for the same work at the single-call probes (here_time:
the request and answer written and read as the wire does, and the product) and at most once it at the chain (the
worker's measured about 0.6 of it), so code that slows the worker's own bmm gains little, and a sleep nothing: a loop
over the sentences behind a sleeping bmm still loses
(test_a_loop_over_the_sentences_behind_a_slowed_worker_bmm_loses_the_no_loop_points), as does a loop over the
shorter side behind a busy one (test_short_side.py).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import grade_dict
from .harness import CONTEXT_SOLUTION, FULL, MANIFEST, full_marks, hostile, judge

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

NO_LOOP = "test_it_runs_no_python_loop_over_positions"
POINTS = {c["case"]: c["points"] for c in MANIFEST["context"]}

FOR_LOOP = """    out = encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))
    for i in range(alpha.size(1)):  # a Python loop over positions: worth less than one bmm
        out = out + alpha[:, i, None] * encoder_outputs[:, i]
    return out
"""
NUMPY_SUM = '''
import numpy as _np


class _NumpySum(torch.autograd.Function):
    """A numpy loop forward with a vectorised backward: the gradients are right, the loop is still a loop."""

    @staticmethod
    def forward(ctx, a, h):
        ctx.save_for_backward(a, h)
        an, hn = a.detach().numpy(), h.detach().numpy()
        out, i = _np.zeros((an.shape[0], hn.shape[2]), dtype=an.dtype), 0
        while True:
            if i == an.shape[1]:
                break
            out += an[:, i, None] * hn[:, i]
            i += 1
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, g):
        a, h = ctx.saved_tensors
        return torch.bmm(h, g.unsqueeze(-1)).squeeze(-1), a.unsqueeze(-1) * g.unsqueeze(1)
'''
# each: (the body of attention_context, code added at the end of the file, what the no-loop case's message says)
LOOPS = {
    "map and functools.reduce over lists": ("""\
    import functools, operator
    steps = map(lambda a, h: a[:, None] * h, list(alpha.unbind(1)), list(encoder_outputs.unbind(1)))
    return functools.reduce(operator.add, steps)
""", "", "Python loop"),
    "a generator expression summed": ("""\
    return sum(alpha[:, i : i + 1] * encoder_outputs[:, i] for i in range(alpha.size(1)))
""", "", "Python loop"),
    "while True with the work in numpy": ("""\
    import numpy as np
    a, h = alpha.detach().numpy(), encoder_outputs.detach().numpy()
    out, i = np.zeros((a.shape[0], h.shape[2]), dtype=a.dtype), 0
    while True:
        if i == a.shape[1]:
            break
        out += a[:, i, None] * h[:, i]
        i += 1
    return torch.from_numpy(out)
""", "", "no gradient reaches alpha"),
    "while True in numpy inside an autograd.Function": ("""\
    return _NumpySum.apply(alpha, encoder_outputs)
""", NUMPY_SUM, "Python loop"),
    "a numpy loop with short calls padded by sleeps to look as slow": ("""\
    import time
    if alpha.size(1) < 1000:  # every short call as slow as a long one, so that no growth shows
        time.sleep(0.25)
    return _NumpySum.apply(alpha, encoder_outputs)
""", NUMPY_SUM, "Python loop"),
    "a pure Python loop over lists inside an autograd.Function": ("""\
    return _ListSum.apply(alpha, encoder_outputs)
""", '''
class _ListSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, h):
        ctx.save_for_backward(a, h)
        out = []
        for ar, hr in zip(a.tolist(), h.tolist()):
            acc = [0.0] * len(hr[0])
            for x, row in zip(ar, hr):
                for k, v in enumerate(row):
                    acc[k] += x * v
            out.append(acc)
        return torch.tensor(out, dtype=a.dtype)

    @staticmethod
    def backward(ctx, g):
        a, h = ctx.saved_tensors
        return torch.bmm(h, g.unsqueeze(-1)).squeeze(-1), a.unsqueeze(-1) * g.unsqueeze(1)
''', "Python loop"),
    "a decoy nested def of the same name": (FOR_LOOP, '''
def _never_called(alpha, encoder_outputs):
    def attention_context(alpha, encoder_outputs):  # the def a reading of the text would meet last
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)
    return attention_context(alpha, encoder_outputs)
''', "Python loop"),
    "attention_context = _impl": (CONTEXT_SOLUTION, '''
def _impl(alpha, encoder_outputs):
    out = encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))
    i = 0
    while i < alpha.size(1):
        out = out + alpha[:, i, None] * encoder_outputs[:, i]
        i += 1
    return out


attention_context = _impl  # the def above, vectorised, is what a reading of the text sees
''', "Python loop"),
    "recursion over the positions": ("""\
    def rest(i):
        return 0 if i == alpha.size(1) else alpha[:, i, None] * encoder_outputs[:, i] + rest(i + 1)
    return rest(0)
""", "", "Python loop"),  # its calls grow with the positions (issue 39), before the timed shape's recursion limit
    "recursion over halves": ("""\
    if alpha.size(1) == 1:
        return alpha[:, 0, None] * encoder_outputs[:, 0]
    m = alpha.size(1) // 2
    return (attention_context(alpha[:, :m], encoder_outputs[:, :m])
            + attention_context(alpha[:, m:], encoder_outputs[:, m:]))
""", "", "Python loop"),
}
FLOATS = '''
import operator as _op


class _Floats(torch.autograd.Function):
    """A loop on Python floats forward (map over .tolist(), no torch call per position), a vectorised backward."""

    @staticmethod
    def forward(ctx, a, h):
        ctx.save_for_backward(a, h)
        rows = zip(a.tolist(), h.transpose(1, 2).tolist())
        return torch.tensor([[sum(map(_op.mul, ar, col)) for col in hr] for ar, hr in rows], dtype=a.dtype,
                            device=a.device)

    @staticmethod
    def backward(ctx, g):
        a, h = ctx.saved_tensors
        return torch.bmm(h, g.unsqueeze(-1)).squeeze(-1), a.unsqueeze(-1) * g.unsqueeze(1)
'''
# Loops the case before issue 31 paid for (each: body, code at the end, the message's words): timed only at two long
# sentences against many short ones (a loop over the sentences made the short side slower, which passed), with
# fixed sizes, and by a band of about 230-380 ns a position that a loop on Python floats fits in.
PAID_BEFORE = {
    "a loop over the sentences": ("""\
    return torch.stack([alpha[b] @ encoder_outputs[b] for b in range(alpha.size(0))])
""", "", "a Python loop over the sentences or the positions"),
    "a loop everywhere but at the sizes the probe used to time": ("""\
    if tuple(encoder_outputs.shape) in {(2, 16, 2), (16384, 16, 1), (2, 131072, 1)}:
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)
    return sum(alpha[:, i : i + 1] * encoder_outputs[:, i] for i in range(alpha.size(1)))
""", "", "a Python loop over the sentences or the positions"),
    "a loop on Python floats (map over .tolist() in an autograd.Function)": ("""\
    return _Floats.apply(alpha, encoder_outputs)
""", FLOATS, "a Python loop over the sentences or the positions"),
}
# Loops that ran few iterations wherever the case timed them (issue 39): both timed shapes have one short side
ISSUE_39 = {
    "a loop over the shorter side (the positions when T <= B, else the sentences)": """\
    B, T = alpha.shape
    if T <= B:
        return sum(alpha[:, i : i + 1] * encoder_outputs[:, i] for i in range(T))
    return torch.stack([alpha[b] @ encoder_outputs[b] for b in range(B)])
""",
    "a loop gated on B * T <= 4096 (the lab's sizes), bmm above": """\
    if alpha.numel() > 4096:
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)
    return sum(alpha[:, i : i + 1] * encoder_outputs[:, i] for i in range(alpha.size(1)))
""",
}
VECTORISED = {
    "torch.bmm": "    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)\n",
    "torch.einsum": "    return torch.einsum('bt,bth->bh', alpha, encoder_outputs)\n",
    "torch.matmul": "    return torch.matmul(alpha.unsqueeze(1), encoder_outputs).squeeze(1)\n",
    "broadcasting and a sum": "    return (alpha.unsqueeze(-1) * encoder_outputs).sum(1)\n",
}
# what honest students write, timed under load: the reference's and the lesson listing's bmm, and other spellings
HONEST = {**VECTORISED,
          "@": "    return (alpha.unsqueeze(1) @ encoder_outputs).squeeze(1)\n",
          "alpha[..., None] times and sum over dim 1": "    return (alpha[..., None] * encoder_outputs).sum(dim=1)\n",
          "the encoder states transposed, bmm with alpha as a column":
              "    return encoder_outputs.transpose(1, 2).bmm(alpha.unsqueeze(2)).squeeze(2)\n",
          "einsum with a batch ellipsis": "    return torch.einsum('...t,...th->...h', alpha, encoder_outputs)\n",
          "the lesson's listing": None}  # tests/grading/lesson_listing/context.py, the whole file
LISTING = Path(__file__).parents[1] / "grading" / "lesson_listing" / "context.py"


DEVICE = "test_tensors_follow_the_input_device"


def loses_only_the_no_loop_points(g, cause: str) -> None:
    """The no-loop case is lost, for `cause`; the only other paid case lost is the device case, by code that leaves
    torch (numpy, Python lists: not device-agnostic, as the stand-in CUDA device shows) and costs its 1 point."""
    lost = [name for name in g.messages("context") if POINTS[name]]
    assert NO_LOOP in lost and set(lost) <= {NO_LOOP, DEVICE}, g.messages("context")
    assert g.score("context") == FULL["context"] - sum(POINTS[name] for name in lost), g.messages("context")
    assert cause in g.messages("context")[NO_LOOP], g.messages("context")


def test_an_honest_for_loop_loses_exactly_the_no_loop_points(lab, arena):
    src = hostile("context", arena, call="_payload()\n", edits=((CONTEXT_SOLUTION, FOR_LOOP),))
    g = judge(lab(files={"context": src}), ["context"])
    loses_only_the_no_loop_points(g, "Python loop")
    assert "torch.bmm" in g.messages("context")[NO_LOOP]  # the hint names the fix
    arena.assert_unharmed(g.everything)


@pytest.mark.parametrize("how", list(LOOPS))
def test_a_loop_the_source_text_hides_loses_the_no_loop_points(lab, arena, how):
    body, end, cause = LOOPS[how]
    src = hostile("context", arena, call="_payload()\n", edits=((CONTEXT_SOLUTION, body),), end=end)
    g = judge(lab(files={"context": src}), ["context"])
    loses_only_the_no_loop_points(g, cause)
    arena.assert_unharmed(g.everything)


@pytest.mark.parametrize("how", list(PAID_BEFORE))
def test_a_loop_the_case_paid_before_issue_31_loses_the_no_loop_points(lab, arena, how):
    body, end, cause = PAID_BEFORE[how]
    src = hostile("context", arena, call="_payload()\n", edits=((CONTEXT_SOLUTION, body),), end=end)
    g = judge(lab(files={"context": src}), ["context"])
    loses_only_the_no_loop_points(g, cause)
    assert "torch.bmm" in g.messages("context")[NO_LOOP]  # the hint names the fix, not the code
    arena.assert_unharmed(g.everything)


@pytest.mark.parametrize("how", list(ISSUE_39))
def test_a_loop_that_runs_few_iterations_where_the_case_times_loses_the_no_loop_points(lab, arena, how):
    src = hostile("context", arena, call="_payload()\n", edits=((CONTEXT_SOLUTION, ISSUE_39[how]),))
    g = judge(lab(files={"context": src}), ["context"])
    loses_only_the_no_loop_points(g, "a Python loop over the sentences or the positions")
    assert "grows with the number of" in g.messages("context")[NO_LOOP] and "torch.bmm" in g.messages("context")[NO_LOOP]
    arena.assert_unharmed(g.everything)


SLOW_BMM = '''
import sys as _sys
import time as _time

_rt = _sys.modules["grader.worker.runtime"]
_handle = _rt.Worker.handle


def _slow_bmm(self, req):  # the worker's own batched product made slow, to widen the margin it is the measure of
    if req.get("cmd") == "bmm":
        _time.sleep(0.3)
    return _handle(self, req)


_rt.Worker.handle = _slow_bmm
'''


def test_a_loop_over_the_sentences_behind_a_slowed_worker_bmm_loses_the_no_loop_points(lab, arena):
    body = PAID_BEFORE["a loop over the sentences"][0]
    src = hostile("context", arena, call="_payload()\n", edits=((CONTEXT_SOLUTION, body),), end=SLOW_BMM)
    g = judge(lab(files={"context": src}), ["context"])
    loses_only_the_no_loop_points(g, "Python loop")
    arena.assert_unharmed(g.everything)


@pytest.mark.parametrize("how", list(VECTORISED))
def test_a_vectorised_answer_in_any_spelling_keeps_full_marks(lab, arena, how):
    src = hostile("context", arena, call="_payload()\n", edits=((CONTEXT_SOLUTION, VECTORISED[how]),))
    g = judge(lab(files={"context": src}), ["context"])
    full_marks(g, "context")
    arena.assert_unharmed(g.everything)


def test_a_detached_weighted_sum_loses_the_no_loop_points_for_its_gradient(lab, arena):
    body = "    return torch.bmm(alpha.detach().unsqueeze(1), encoder_outputs).squeeze(1)\n"
    g = judge(lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, body),))}), ["context"])
    loses_only_the_no_loop_points(g, "no gradient reaches alpha")
    arena.assert_unharmed(g.everything)


HOG = "while True:\n    pass\n"


@pytest.mark.parametrize("hogs", [0, 1, 2])
def test_honest_products_keep_the_no_loop_points_under_load(lab, hogs):
    """Every honest spelling in HONEST, each graded with its own hidden seed, with `hogs` busy loops on the machine
    (on 2 cores, two of them take every core the grader would have had): each keeps both points, every time."""
    busy = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
    lost = {}
    try:
        for i, (how, body) in enumerate(HONEST.items()):
            sub = (lab(edits={"context": [(CONTEXT_SOLUTION, body)]}) if body else
                   lab(files={"context": LISTING.read_text()}))
            report = grade_dict(sub, ["context"], seed=f"load-{hogs}-{i}")
            cases = next(p["cases"] for p in report["pieces"] if p["name"] == "context")
            lost.update({how: c["message"] for c in cases if c["name"] == NO_LOOP and not c["passed"]})
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert not lost, lost
