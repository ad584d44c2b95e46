"""Loops over positions in every spelling: the context's no-loop points are paid from behaviour, never from the source.

The case (test_it_runs_no_python_loop_over_positions, 2 points) first checks the values and that the gradients with
respect to alpha and the encoder outputs are the reference's (one differentiable function of both), then times on the
judge's clock calls on fresh inputs for 2 sentences of 131072 positions, for 16384 sentences of 16 (as many encoder
states: the same bytes on the wire, the same multiply-adds) and for a tiny batch, checking every answer. So a loop
hidden from a reading of the text (map and reduce, `while True` and numpy, a decoy def of the same name,
`attention_context = _impl`) pays like any other loop, and a vectorised answer in any spelling keeps the points.

What the limits were chosen from (grader/cases/test_context.py; each figure the minimum of a round of 3 calls at each
size, in ms, on this project's 2-core machine: quiet (load 2), and with other graders and two busy loops running
(load 3 to 9)):

    spelling                          positions: long - short      own: long - tiny (at most 20 ms of it)
    bmm, einsum, matmul, broadcasting  -1.4 to +1.2 quiet            5 to 7 quiet
      and a sum                        -47 to +28 loaded             5 to 80 loaded
    a numpy loop (autograd.Function)   +194 to +225                  200 to 232
      the same, short calls padded     about -30                     216
    a pure Python loop over lists      -440 to +43                   271 to 584
    torch loops: for, a generator,     +850 to +2150                 the same
      map and reduce, halves
    plain recursion                    Python's recursion limit, at 131072 positions

Limits (pass below, fail above, measured again in between, for at most 4 rounds on the minimum of all calls so far,
then the middle decides): positions 30 / 60 / 120 ms, own 60 / 100 / 200 ms. Positions: vectorised at most 28 under
load, loops at least 194, either side of the middle by 2x or more. Own: vectorised 7 quiet and at most 80 in one round
under load (measured again: the minimum over more rounds falls), loops at least 200, twice the middle.
"""
from __future__ import annotations

import pytest

from .harness import CONTEXT_SOLUTION, FULL, MANIFEST, full_marks, hostile, judge

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
""", NUMPY_SUM, "tiny batch"),
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
""", "", "recursion"),
    "recursion over halves": ("""\
    if alpha.size(1) == 1:
        return alpha[:, 0, None] * encoder_outputs[:, 0]
    m = alpha.size(1) // 2
    return (attention_context(alpha[:, :m], encoder_outputs[:, :m])
            + attention_context(alpha[:, m:], encoder_outputs[:, m:]))
""", "", "Python loop"),
}
VECTORISED = {
    "torch.bmm": "    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)\n",
    "torch.einsum": "    return torch.einsum('bt,bth->bh', alpha, encoder_outputs)\n",
    "torch.matmul": "    return torch.matmul(alpha.unsqueeze(1), encoder_outputs).squeeze(1)\n",
    "broadcasting and a sum": "    return (alpha.unsqueeze(-1) * encoder_outputs).sum(1)\n",
}


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
