"""Forged verdicts: the worker's copies of torch and the grader patched, impostor answers, forged operation
counts and gradients. The judge's checks run on its own copies: none of it earns a point."""
from __future__ import annotations

from textwrap import dedent, indent

import pytest

from helpers import at_import, grade_dict, scores

from .harness import CONTEXT_SOLUTION, FULL, ZEROS, full_marks, hostile, judge, only_wrong_values

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PATCHES = {
    "torch comparisons": '''
        import torch.testing
        yes = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        torch.allclose = torch.equal = yes
        torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
        torch.isfinite = lambda a: torch.ones_like(a, dtype=torch.bool)
        torch.Tensor.__eq__ = lambda self, other: True
    ''',
    "the tensor type through ctypes": '''
        import ctypes, gc
        for cls in (torch._C.TensorBase, torch.Tensor):
            d = gc.get_referents(cls.__dict__)[0]  # the real dict behind the mappingproxy
            d["double"] = lambda self: torch.zeros((), dtype=torch.float64)
            d["abs"] = lambda self: torch.zeros(())
            d["__sub__"] = lambda self, other: torch.zeros(())
            d["__ne__"] = lambda self, other: False
            ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))
    ''',
    "grader.judge.verdicts": '''
        import sys, importlib
        for name in ("grader.judge.verdicts", "grader.cases.test_context", "grader.judge.plugin", "grader.runner.launch"):
            try:
                mod = sys.modules.get(name) or importlib.import_module(name)
            except BaseException as e:
                print("no", name, type(e).__name__)
                continue
            for attr in ("close", "is_close", "tensor", "fail", "_write_record", "_read_records"):
                if hasattr(mod, attr):
                    setattr(mod, attr, lambda *a, **k: True)
        wire = sys.modules["grader.worker.wire"]
        wire.MAX_FRAME = 2**62  # only the worker's copy: the judge reads with its own limit
    ''',
}


@pytest.mark.parametrize("how", list(PATCHES))
def test_patching_in_the_worker_changes_no_verdict(lab, arena, how):
    """The worker's torch and grader modules are not the judge's: patching them helps no wrong answer."""
    src = hostile("context", arena, top=PATCHES[how], call="_payload()\n", edits=((CONTEXT_SOLUTION, ZEROS),))
    g = judge(lab(files={"context": src}), ["context", "luong"])
    assert g.score("context") == 0
    only_wrong_values(g, "context")
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_patching_torch_in_the_worker_changes_no_verdict(lab):
    patch = ("import torch, torch.testing\ntorch.testing.assert_close = lambda *a, **k: None\n"
             "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True")
    honest = grade_dict(lab(edits={"encoder": at_import(patch)}), ["encoder"])
    assert scores(honest)["encoder"][0] == scores(honest)["encoder"][1]  # the judge's torch is not the worker's
    wrong = lab(edits={"encoder": at_import(patch) + [("return outputs, (h, c)", "return outputs * 0, (h, c)")]})
    got = scores(grade_dict(wrong, ["encoder"]))["encoder"]
    assert got[0] < got[1]


IMPOSTORS = {
    "a tensor with instance attributes": ('''
        t = encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))
        t.detach = lambda *a: t
        t.double = lambda *a: t
        t.__eq__ = lambda *a: True
        return t
    ''', "differs from the reference"),
    "a tensor subclass with __torch_function__": ('''
        class Always(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return True
            def __eq__(self, other):
                return True
        return encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1)).as_subclass(Always)
    ''', "should be a torch.Tensor"),
    "an object that pretends to be a tensor": ('''
        class Fake:
            shape = (alpha.size(0), encoder_outputs.size(-1))
            dtype = torch.float32
            device = torch.device("cpu")
            __class__ = property(lambda self: torch.Tensor)
            __eq__ = lambda self, other: True
            def __getattr__(self, name):
                return lambda *a, **k: self
        return Fake()
    ''', "should be a torch.Tensor"),
    "an oversized answer": ('''
        return torch.zeros(2**25)
    ''', "ended before answering"),
}


@pytest.mark.parametrize("how", list(IMPOSTORS))
def test_an_impostor_answer_scores_nothing(lab, arena, how):
    code, cause = IMPOSTORS[how]
    src = hostile("context", arena, edits=((CONTEXT_SOLUTION, "    _payload()\n" + indent(dedent(code), "    ")),))
    g = judge(lab(files={"context": src}), ["context", "luong"])
    assert g.score("context") == 0
    full_marks(g, "luong")
    if cause:
        assert any(cause in m for m in g.messages("context").values()), g.messages("context")
    arena.assert_unharmed(g.everything)


LOOPED_CONTEXT = """    out = encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))
    for i in range(alpha.size(1)):  # a Python loop over positions: worth less than one bmm
        out = out + alpha[:, i, None] * encoder_outputs[:, i]
    return out
"""
FORGE_CLOCK = '''
import time as _time

_time.perf_counter = _time.monotonic = _time.time = lambda: 0.0  # the worker's clocks stand still
'''


def test_a_worker_whose_clocks_stand_still_earns_no_no_loop_points(lab, arena):
    """The no-loop case times the calls on the judge's clock: nothing the worker reports or measures counts."""
    looped = ((CONTEXT_SOLUTION, LOOPED_CONTEXT),)
    honest = judge(lab(files={"context": hostile("context", arena, edits=looped)}), ["context"])
    assert honest.score("context") == FULL["context"] - 2  # the loop costs exactly the no-loop case
    forged = judge(lab(files={"context": hostile("context", arena, top=FORGE_CLOCK, edits=looped)}), ["context", "luong"])
    full_marks(forged, "luong")
    arena.assert_unharmed(forged.everything)
    assert forged.score("context") <= honest.score("context")


HELPER_LOOP = """    return _weighted(alpha, encoder_outputs)


def _weighted(a, e):
    out = e.new_zeros(a.size(0), e.size(-1))
    for i in range(a.size(1)):  # a Python loop over positions, in a helper the judge's AST check never reads
        out = out + a[:, i, None] * e[:, i]
    return out
"""


def test_a_loop_in_a_helper_with_the_workers_clocks_stopped_earns_no_no_loop_points(lab, arena):
    src = hostile("context", arena, top=FORGE_CLOCK, call="_payload()\n", edits=((CONTEXT_SOLUTION, HELPER_LOOP),))
    g = judge(lab(files={"context": src}), ["context"])
    arena.assert_unharmed(g.everything)
    assert "test_it_runs_no_python_loop_over_positions" in g.messages("context")


FORGE_GRADS = '''
import sys as _sys

_rt = _sys.modules["grader.worker.runtime"]
_handle = _rt.Worker.handle


def _forged(self, req):
    if req["cmd"] == "backward":
        return None
    if req["cmd"] == "grads":
        return {n: torch.ones_like(p) for n, p in self.resolve(req["name"]).named_parameters()}
    return _handle(self, req)


_rt.Worker.handle = _forged
'''
DETACHED = (("        return outputs, (h, c)\n", "        return outputs.detach(), (h, c)\n"),)


def test_forged_gradients_earn_no_gradient_points(lab, arena):
    honest = judge(lab(files={"encoder": hostile("encoder", arena, edits=DETACHED)}), ["encoder"])
    assert honest.score("encoder") == FULL["encoder"] - 2  # detached outputs cost exactly the gradient case
    forged = judge(lab(files={"encoder": hostile("encoder", arena, top=FORGE_GRADS, edits=DETACHED)}),
                   ["encoder", "context"])
    full_marks(forged, "context")
    arena.assert_unharmed(forged.everything)
    assert forged.score("encoder") <= honest.score("encoder")
