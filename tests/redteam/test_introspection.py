"""Taking the answer from the worker's own process: its modules, stack frames and heap, the texts it was
sent, the reference on disk through a file handle, and the lab's own modules (the grader's evaluator, the
baseline's encoder)."""
from __future__ import annotations

from textwrap import dedent, indent

import pytest

from helpers import QUICK, REFERENCE

from .harness import EXERCISES, full_marks, hostile, judge, only_wrong_values, stealing_context

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

STEALS = {
    "sys.modules": '''
        import sys
        for name, mod in list(sys.modules.items()):
            if mod is None or mod is sys.modules[__name__]:
                continue
            if "reference" in name or "cases" in name or name.startswith("attnlab_reference"):
                print("found module", name)
            try:  # some modules answer any attribute (torch.classes raises on unknown ones)
                fns = [getattr(mod, "attention_context", None)]
                fns += [getattr(getattr(mod, holder, None), "attention_context", None) for holder in ("context", "ref")]
            except Exception:
                continue
            for fn in fns:
                if callable(fn) and fn is not attention_context:
                    return fn(alpha, encoder_outputs)
        return None
    ''',
    "stack frames": '''
        import inspect, sys
        names = ("ref", "expected", "want", "request", "key", "rc", "ra", "r", "st", "reference")
        frames = []
        f = sys._getframe(1)
        while f is not None:
            frames.append(f)
            f = f.f_back
        frames += [info.frame for info in inspect.stack()]
        try:
            raise RuntimeError
        except RuntimeError as e:
            tb = e.__traceback__
            while tb is not None:
                frames.append(tb.tb_frame)
                tb = tb.tb_next
        for frame in frames:
            for name, value in list(frame.f_locals.items()) + list(frame.f_globals.items()):
                if name not in names:
                    continue
                print("found local", name, type(value).__name__)
                fn = getattr(getattr(value, "context", None), "attention_context", None)
                if callable(fn) and fn is not attention_context:
                    return fn(alpha, encoder_outputs)
                if isinstance(value, torch.Tensor) and value.shape == (alpha.size(0), encoder_outputs.size(-1)):
                    return value
        return None
    ''',
    "gc heap scan": '''
        import gc, types
        mine = attention_context
        for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType) and obj.__name__ == "attention_context" and obj is not mine:
                return obj(alpha, encoder_outputs)
            if isinstance(obj, types.ModuleType) and ("reference" in obj.__name__ or "cases" in obj.__name__):
                fn = getattr(obj, "attention_context", None)
                if callable(fn) and fn is not mine:
                    return fn(alpha, encoder_outputs)
            if isinstance(obj, dict) and "attention_context" in obj and obj.get("attention_context") is not mine:
                fn = obj["attention_context"]
                if callable(fn) and fn is not mine:
                    return fn(alpha, encoder_outputs)
            if isinstance(obj, str) and "torch.bmm(alpha" in obj and "def attention_context" in obj:
                ns = {}
                exec(obj, ns)
                return ns["attention_context"](alpha, encoder_outputs)
        return None
    ''',
    "a file handle past Landlock": '''
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)

        class Handle(ctypes.Structure):
            _fields_ = [("size", ctypes.c_uint), ("type", ctypes.c_int), ("bytes", ctypes.c_ubyte * 128)]

        handle, mount = Handle(128), ctypes.c_int()
        if libc.name_to_handle_at(-100, (LAB + "/reference/context.py").encode(), ctypes.byref(handle),
                                  ctypes.byref(mount), 0) != 0:
            return None
        for anchor in ("/usr", "/lib", "/"):
            try:
                at = os.open(anchor, os.O_RDONLY)
            except OSError:
                continue
            fd = libc.open_by_handle_at(at, ctypes.byref(handle), os.O_RDONLY)  # needs CAP_DAC_READ_SEARCH
            if fd >= 0:
                ns = {}
                exec(os.read(fd, 1 << 16).decode(), ns)
                return ns["attention_context"](alpha, encoder_outputs)
        return None
    ''',
    "the record key and the records": '''
        import glob, os
        for k, v in os.environ.items():
            if "ATTNLAB" in k or "KEY" in k or "PYTEST" in k:
                print("env", k, v)
        for fd in range(4, 64):
            try:
                print("fd", fd, os.read(fd, 256))
            except OSError:
                pass
        for path in glob.glob("/tmp/attnlab-*/records.jsonl") + glob.glob("/tmp/*/records.jsonl"):
            try:
                with open(path, "a") as f:  # a forged record: the file is out of reach, and the mac cannot be right
                    f.write('{"record": "forged", "mac": "0"}')
            except OSError:
                pass
        for path in ("/proc/self/environ", f"/proc/{os.getppid()}/environ", f"/proc/{os.getppid()}/cmdline"):
            try:
                print(path, open(path, "rb").read()[:200])
            except OSError:
                pass
        return None
    ''',
}


@pytest.mark.parametrize("how", list(STEALS))
def test_the_answer_cannot_be_taken_from_the_process(lab, arena, how):
    sub = lab(files={"context": stealing_context(arena, STEALS[how])})
    g = judge(sub, ["context", "luong"])
    assert g.score("context") == 0, f"{how}: context scored {g.score('context')} on a stolen answer"
    only_wrong_values(g, "context")
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


SIBLING_LEAK = '''
import sys as _sys

_f = _sys._getframe()
while _f is not None:  # Worker.load holds every module it was sent: the reference's earlier pieces included
    _mods = _f.f_locals.get("modules")
    for (_stem, _text) in (_mods if isinstance(_mods, (list, tuple)) else []):
        if _stem != __name__.rpartition(".")[2] and isinstance(_text, str):
            _body = _text.split("### BEGIN SOLUTION", 1)[-1].split("### END SOLUTION", 1)[0]
            for _line in _body.strip().splitlines():
                print(_line.strip())
    _f = _f.f_back
'''


def test_a_later_piece_cannot_print_the_reference_of_an_earlier_one(lab, arena):
    # the decoder's worker runs on the reference's encoder, context and additive; their text must be gone by then
    src = hostile("decoder", arena, end=SIBLING_LEAK, call="_payload()\n")
    g = judge(lab(files={"decoder": src}), ["decoder", "encoder"])
    full_marks(g, "decoder", "encoder")
    arena.assert_unharmed(g.text)


def test_a_decoder_cannot_import_the_reference_decoder(lab, arena):
    end = '''
        import importlib, sys, types

        def _steal():
            for name in ("reference.decoder", "attnlab_reference.decoder", "grader.cases.test_decoder"):
                try:
                    mod = importlib.import_module(name)
                    if hasattr(mod, "Seq2SeqAttn"):
                        return mod
                except BaseException as e:
                    print("no", name, type(e).__name__)
            for mod in list(sys.modules.values()):
                if getattr(mod, "Seq2SeqAttn", None) is not None and mod is not sys.modules[__name__]:
                    return mod
            try:
                ns = {"__name__": __name__ + "_stolen", "__package__": __package__}
                exec(open(LAB + "/reference/decoder.py").read(), ns)
                return types.SimpleNamespace(**ns)
            except BaseException as e:
                print("no file", type(e).__name__)
            return None

        _payload()
        _stolen = _steal()
        if _stolen is not None:
            AttnDecoder, Seq2SeqAttn = _stolen.AttnDecoder, _stolen.Seq2SeqAttn
    '''
    src = hostile("decoder", arena, base=EXERCISES, end=end)
    g = judge(lab(files={"decoder": src}), ["decoder", "encoder"])
    assert g.score("decoder") == 0, g.messages("decoder")
    full_marks(g, "encoder")
    arena.assert_unharmed(g.everything)


EVAL_VIA_GRADER = {
    "importing grader.lab.evaluate at the top": (
        "from grader.lab import evaluate as _trusted\nfrom grader.lab import toy as _toy\n", '''
        return _trusted.batch_accuracy_by_length(model, _toy.Batch(src, src_mask, tgt))
    ''', 0),
    "reaching grader.lab.evaluate through grader.lab.train and grader.lab.toy": (
        "import grader.lab.train as _train\nimport grader.lab.toy as _toy\n", '''
        import importlib
        _trusted = importlib.import_module(_train.__name__.rpartition(".")[0] + ".evaluate")
        return _trusted.batch_accuracy_by_length(model, _toy.Batch(src, src_mask, tgt))
    ''', 0),  # no lab module imports in a worker (none holds grader.lab.train): the file fails to import
}


@pytest.mark.parametrize("how", list(EVAL_VIA_GRADER))
def test_the_graders_evaluator_cannot_grade_the_evaluation_piece(lab, arena, how):
    top, body, want = EVAL_VIA_GRADER[how]
    ref = (REFERENCE / "evaluation.py").read_text()
    solution = ref[ref.index("    ### BEGIN SOLUTION\n    pred, _ = greedy_decode"):ref.rindex("    ### END SOLUTION")]
    src = hostile("evaluation", arena, top=top, call="",
                  edits=((solution, "    _payload()\n" + indent(dedent(body), "    ")),))
    g = judge(lab(files={"evaluation": src}), ["evaluation", "decoder"])
    assert g.score("evaluation") == want, g.messages("evaluation")
    full_marks(g, "decoder")
    arena.assert_unharmed(g.everything)


@pytest.mark.parametrize("module", ["grader.lab.baseline", "grader.lab.luong_model", "grader.lab.train", "grader.lab.evaluate",
                                    "grader.lab.toy", "grader.judge.reference_code", "grader.plots.draw"])
def test_no_lab_module_that_solves_a_piece_is_in_or_importable_from_a_worker(lab, arena, module):
    probe = f'''
import sys as _sys
try:
    import {module} as _m
    _where = "imported " + str(getattr(_m, "__file__", "?"))
except BaseException as _e:
    _where = "refused " + type(_e).__name__
print("LABMOD " + repr(({module!r}, {module!r} in _sys.modules, _where)))
'''
    sub = lab(files={"encoder": hostile("encoder", arena, end=probe)})
    g = judge(sub, ["encoder"], QUICK)
    line = next(ln for ln in g.output.splitlines() if "LABMOD " in ln)
    name, loaded, where = eval(line.split("LABMOD ", 1)[1])  # noqa: S307
    assert not loaded and where.startswith("refused"), (name, loaded, where)


def test_borrowing_the_lab_encoder_earns_the_encoder_nothing(lab, arena):
    steal = """import sys as _s
for _n in ("grader.lab.baseline", "grader.lab.luong_model"):
    _m = _s.modules.get(_n)
    if _m is not None and hasattr(_m, "Encoder"):
        return _m.Encoder.forward(self, src)
raise NotImplementedError("piece 'encoder': nothing to borrow")
"""
    g = judge(lab(files={"encoder": hostile("encoder", arena, call=steal)}), ["encoder"], QUICK)
    assert g.score("encoder") == 0, g.messages("encoder")
    arena.assert_unharmed(g.everything)
