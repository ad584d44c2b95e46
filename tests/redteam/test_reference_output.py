"""Reference code carried out through a worker's own output: the decoder's worker holds the reference's encoder,
context and additive code, and a decoder that disassembles it and prints it, warns it, raises it in exception
messages, class or function names, exit codes, returned objects or forged error records would hand the next push
34 points. The reference here carries a canary in every solution block; no channel may show it (the text
table, JSON, the Classroom payload, Gradescope's results, JUnit, `grade batch`'s reports, the CLI's log), while
an encoder or context (whose workers hold no reference) still shows what it printed and raised."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from textwrap import indent

import pytest

from grader import ROOT
from grader.judge.reference_code import ORDER
from grader.judge.sources import student_sources
from grader.core.pieces import PIECES
from grader.runner import layout, report
from grader.runner.schedule import grade
from grader.runner.stage import stage

from helpers import QUICK, REFERENCE

from .harness import FULL, Graded, hostile, run_batch, run_cli

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

CANARY = "ZQCANARY"
WITHHELD = "your code's prints and error messages are withheld"


@pytest.fixture(scope="module")
def canary_reference(tmp_path_factory) -> Path:
    """The reference with `_canary = "ZQCANARY_<piece>"` at the top of every solution block: it is in each
    solution's bytecode (co_consts, co_varnames, dis), where code that holds the reference can find it."""
    out = tmp_path_factory.mktemp("canary") / "reference"
    shutil.copytree(REFERENCE, out)
    for piece in PIECES.values():
        path = out / f"{piece.module}.py"
        text = re.sub(r"^( *)### BEGIN SOLUTION\n", lambda m: f'{m.group(0)}{m.group(1)}_canary = "{CANARY}_{piece.name}"\n',
                      path.read_text(), flags=re.M)
        path.write_text(text)
    return out


def leaks(text: str) -> list[str]:
    """The canary as it was stolen: as text, as hex, or as its bytes listed as numbers (a shape, a length)."""
    forms = [CANARY, CANARY.lower(), CANARY.encode().hex(), ", ".join(str(b) for b in CANARY.encode()[:4])]
    return [f for f in forms if f in text]


def channels(runs, sub: Path) -> str:
    """Every report a student sees, as `grade`, Classroom, Gradescope and CI write them."""
    payload = json.loads(base64.b64decode(report.to_classroom(runs)))
    return "\n".join([report.to_text(runs, str(sub)), report.to_json(runs), json.dumps(payload),
                      report.to_gradescope(runs), report.to_junit(runs), *(r.output for r in runs)])


def graded(sub: Path, pieces: list[str], reference: Path) -> tuple[Graded, str]:
    with tempfile.TemporaryDirectory(prefix="attnlab-redteam-") as tmp:
        runs = grade(submission=stage(sub, Path(tmp)), pieces=pieces, seed="0", limits=QUICK, reference=reference)
    g = Graded(report.as_dict(runs), report.to_text(runs, str(sub)), "".join(r.output for r in runs))
    return g, channels(runs, sub)


# what a hostile file runs at import: everything it can read of the modules beside it, the reference's own
DUMP = '''
import dis as _dis, inspect as _inspect, io as _io, sys as _sys, types as _types


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, _types.CodeType):
            yield from _codes(const)


def _dump():
    out = []
    for name, mod in sorted(_sys.modules.items()):
        if not name.startswith("attnlab_submission.") or name == __name__ or mod is None:
            continue
        for obj in list(vars(mod).values()):
            for fn in ([obj, *vars(obj).values()] if isinstance(obj, type) else [obj]):
                code = getattr(fn, "__code__", None)
                if code is None:
                    continue
                out.append(repr(fn))
                try:
                    out.append(_inspect.getsource(fn))
                except Exception as e:
                    out.append("no source: " + type(e).__name__)
                for c in _codes(code):
                    buf = _io.StringIO()
                    _dis.dis(c, file=buf)
                    out += [buf.getvalue(), repr(c.co_consts), repr(c.co_names), repr(c.co_varnames), c.co_code.hex()]
    return "\\n".join(out)


_TEXT = _dump()
_AT = max(0, _TEXT.find("ZQ" + "CANARY"))  # the hostile code has no canary of its own: it looks for what it stole
_CHUNK = _TEXT[_AT:_AT + 150]
_IDENT = "Leak_" + "".join(ch if ch.isalnum() else "_" for ch in _CHUNK[:90])
'''


def test_the_dump_finds_the_canary_in_the_decoders_worker(canary_reference, tmp_path):
    """The control: loaded as the decoder's worker loads it (grader.worker.runtime), unjailed, the dump prints
    the reference's bytecode with its canary, so the tests below would see any channel that carries it."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "decoder.py").write_text("from .additive import BahdanauAttention\n" + DUMP + "\nprint(_CHUNK)\n")
    sources = student_sources(sub, canary_reference, "decoder", ORDER)
    script = ("import json, sys\nfrom grader.worker.runtime import Worker\n"
              "Worker(-1).load(json.loads(sys.stdin.read()), 'decoder', 'decoder.py', 0)\n")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(sources), capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{CANARY}_encoder" in done.stdout or f"{CANARY}_additive" in done.stdout or f"{CANARY}_context" in done.stdout


EMIT = '''
import os as _os2, warnings as _warnings
print(_TEXT)
print(_TEXT.encode().hex()[:20000])
_sys.stderr.write(_CHUNK + "\\n")
_os2.write(2, _CHUNK.encode() + b"\\n")
_warnings.warn(_CHUNK)
'''


def test_a_decoder_that_prints_and_warns_the_references_bytecode_shows_none_of_it_and_keeps_its_points(
        lab, arena, canary_reference):
    call = "_payload()\nprint(_CHUNK)\n_warnings.warn(_IDENT)\n"
    src = hostile("decoder", arena, end=DUMP + EMIT, call=call)
    g, seen = graded(lab(files={"decoder": src}), ["decoder", "encoder"], canary_reference)
    assert g.score("decoder") == FULL["decoder"] and g.score("encoder") == FULL["encoder"], g.messages("decoder")
    assert not leaks(seen), leaks(seen)
    assert g.output == ""  # not even the prints' tail
    assert any(ln.strip().startswith(WITHHELD) for ln in g.text.splitlines()), g.text  # and the report says why
    decoder = next(p for p in g.report["pieces"] if p["name"] == "decoder")
    assert decoder["output_withheld"].startswith(WITHHELD) and "reference's encoder, context and additive" in \
        decoder["output_withheld"]
    arena.assert_unharmed(seen)


# one way out per call, cycling: the worker keeps its module (and this counter) from case to case
RAISE = '''
import os as _os3, sys as _sys3, warnings as _w3
_wire = _sys3.modules["grader.worker.wire"]
_N = [{start}]


def _thrower():
    raise RuntimeError("x")


def _leak():
    how = _N[0] % 11
    _N[0] += 1
    if how == 0:
        raise ValueError(_CHUNK)
    if how == 1:
        raise type(_IDENT, (Exception,), {})(_CHUNK)
    if how == 2:
        _thrower.__code__ = _thrower.__code__.replace(co_name=_IDENT)
        _thrower()
    if how == 3:  # a frame "in decoder.py" at a line the file does not have, in a function named by the canary
        code = compile("\\n" * 10 + "raise KeyError(" + repr(_CHUNK) + ")", "decoder.py", "exec")
        exec(code.replace(co_firstlineno=int(_CHUNK.encode()[:4].hex(), 16), co_name=_IDENT), {})
    if how == 4:
        return type(_IDENT, (), {})()  # an object that cannot travel: its class's name does
    if how == 5:
        return torch.zeros(0, *_CHUNK.encode()[:7])  # a shape that spells the canary
    if how == 6:
        return tuple(range(31337))
    if how == 7:
        _sys3.exit(_CHUNK)
    if how == 8:
        _w3.warn(_CHUNK)
        raise NotImplementedError(_CHUNK)
    if how == 9:  # a forged error record, straight onto the worker's socket (the real answer follows it)
        _wire.send(3, {"ok": False, "error": {"kind": "error", "type": _IDENT, "message": _CHUNK,
                                              "where": " (in decoder.py, line 3, in " + _CHUNK + ")"}})
        return None
    _wire.send(3, {"ok": True, "value": {"__kind__": _CHUNK}})  # a malformed value: its tag is quoted back
    return None
'''


def _raising_decoder(arena, start: int) -> str:
    call = ("_payload()\n_got = _leak()\nif _got is not None:\n"  # a long tuple as the state, anything else as logits
            "    return (_got, _got, _got) if isinstance(_got, tuple) else (_got, (h_prev, c_prev), _got)\n")
    forward = "_got = _leak()\nif _got is not None:\n    return _got if isinstance(_got, tuple) else (_got, _got)\n"
    text = hostile("decoder", arena, end=DUMP + RAISE.replace("{start}", str(start)))
    text = text.replace("        ### BEGIN SOLUTION\n        h_prev, c_prev = state  # (B, H) each\n",
                        "        ### BEGIN SOLUTION\n        h_prev, c_prev = state  # (B, H) each\n" + indent(call, " " * 8), 1)
    return text.replace("        ### BEGIN SOLUTION\n        enc_outputs,", "        ### BEGIN SOLUTION\n" +
                        indent(forward, " " * 8) + "        enc_outputs,", 1)


@pytest.mark.parametrize("start", [0, 6])  # where in the cycle the first call starts: two grades meet every way
def test_a_decoder_that_raises_returns_and_forges_the_references_bytecode_shows_none_of_it(lab, arena, canary_reference,
                                                                                          start):
    g, seen = graded(lab(files={"decoder": _raising_decoder(arena, start)}), ["decoder", "encoder"], canary_reference)
    assert g.score("decoder") == 0 and g.score("encoder") == FULL["encoder"]
    assert not leaks(seen), leaks(seen)
    assert "31337" not in seen and "Leak_" not in seen, [m for m in g.messages("decoder").values()]
    messages = g.messages("decoder").values()
    # what stays: the judge's own words, a built-in type, the student's own file and a line it has
    assert all("withheld" in m or "another" in m or "of its own" in m or "sys.exit()" in m or "not an answer" in m
               or " should " in m for m in messages), messages  # "should be a tuple of 2, got NoneType": a stale answer
    assert any(re.search(r"raised [A-Za-z]+Error \(in decoder\.py, line \d+\); its message is withheld", m)
               for m in messages) or start, messages
    assert any(ln.strip().startswith(WITHHELD) for ln in g.text.splitlines()), g.text
    arena.assert_unharmed(seen)


KILL = '''
import os as _os4, signal as _signal4, sys as _sys4


def _leak():
    how = torch.initial_seed() % 3  # the case's own seed: a new worker after each death
    if how == 0:
        _os4._exit(_CHUNK.encode()[0])  # an exit code
    if how == 1:
        _os4.kill(_os4.getpid(), _signal4.SIGUSR1 if _CHUNK.encode()[1] % 2 else _signal4.SIGUSR2)  # a signal
    _sys4.modules["grader.worker.wire"].send(3, {"ok": False, "error": [_CHUNK]})  # a malformed error
    _os4._exit(0)
'''


def test_a_decoder_whose_worker_dies_by_exit_codes_and_signals_says_only_that_it_ended(lab, arena, canary_reference,
                                                                                     tmp_path, monkeypatch):
    text = hostile("decoder", arena, end=DUMP + KILL, call="_payload()\n_leak()\n")
    sub = lab(files={"decoder": text})
    g, seen = graded(sub, ["decoder"], canary_reference)
    assert g.score("decoder") == 0
    messages = set(g.messages("decoder").values())
    assert not leaks(seen) and not re.search(r"exit code|signal|SIGUSR", seen), messages
    assert any("exited early" in m for m in messages) and any("crashed" in m for m in messages), messages
    # `grade batch` (its JSON report per student) and the CLI's log and JSON, on the canary's reference
    monkeypatch.setattr(layout, "current", lambda: layout.Layout(ROOT / "grader" / "cases", canary_reference,
                                                                 ROOT / "grader" / "cases" / "manifest.json"))
    run_batch([sub], ["decoder"], tmp_path, monkeypatch)
    batch = "\n".join(p.read_text() for p in (tmp_path / "reports").glob("*.json"))
    cli = run_cli(sub, ["decoder"], tmp_path)
    assert not leaks(batch + cli.text + json.dumps(cli.report)), leaks(batch + cli.text)
    assert not re.search(r"exit code|signal", batch + json.dumps(cli.report))
    arena.assert_unharmed(batch, cli.text)


def test_a_decoder_that_raises_the_reference_at_import_is_told_only_the_type_and_line(lab, arena, canary_reference):
    end = DUMP + "\nraise type(_IDENT, (Exception,), {})(_CHUNK)\n"
    g, seen = graded(lab(files={"decoder": hostile("decoder", arena, end=end)}), ["decoder"], canary_reference)
    assert g.score("decoder") == 0
    assert not leaks(seen) and "Leak_" not in seen
    message = set(g.messages("decoder").values())
    assert len(message) == 1 and re.fullmatch(r"importing decoder\.py raised an exception of a class of its own "
                                               r"\(in decoder\.py, line \d+\); its message is withheld", message.pop())


def test_an_undeclared_import_of_luong_finds_no_luong_reference_in_the_decoders_worker(lab, arena, canary_reference):
    """The decoder's registry entry imports the encoder and the additive attention, not luong: its worker is not
    given the reference luong however its file asks. It would lose every point if it were."""
    top = '''
try:
    from .luong import LuongDotAttention as _Luong
except ImportError:
    _Luong = None
import importlib as _il
try:
    _il.import_module(__package__ + ".luong")
    _Luong = _Luong or "found"
except ImportError:
    pass
'''
    call = "_payload()\nif _Luong is not None:\n    print(_Luong)\n    return None\n"
    src = hostile("decoder", arena, top=top, call=call, end=DUMP + "\nprint(_TEXT)\n")
    g, seen = graded(lab(files={"decoder": src}), ["decoder"], canary_reference)
    assert g.score("decoder") == FULL["decoder"], g.messages("decoder")
    assert f"{CANARY}_luong" not in seen
    arena.assert_unharmed(seen)


def test_an_encoder_that_prints_and_a_context_that_raises_still_show_their_own_output(lab, arena, canary_reference):
    """Their workers hold no reference: what they print and raise is the student's own, and shown."""
    encoder = hostile("encoder", arena, call="print('ENCODER-PRINTS-THIS')\n")
    context = hostile("context", arena, call="raise ValueError('CONTEXT-SAYS-THIS')\n")
    g, seen = graded(lab(files={"encoder": encoder, "context": context}), ["encoder", "context"], canary_reference)
    assert g.score("encoder") == FULL["encoder"] and g.score("context") == 0
    assert "ENCODER-PRINTS-THIS" in g.output and "| ENCODER-PRINTS-THIS" in g.text
    assert any("raised ValueError: CONTEXT-SAYS-THIS (in context.py, line" in m for m in g.messages("context").values())
    assert WITHHELD not in seen
    arena.assert_unharmed(seen)


# ---- each way out, one at a time, in the judge's own functions (no grading: what every message is made of) ----

STOLEN = "ZQCANARY_additive = torch.softmax(scores.masked_fill(~src_mask, -inf), dim=-1)"


@pytest.fixture
def withholding():
    from grader.judge import withhold

    stubs = withhold.stub_messages((REFERENCE / "decoder.py").read_text(), "decoder")
    withhold.configure(True, "decoder.py", "x = 1\n" * 50, stubs)
    yield withhold
    withhold.configure(False)


def test_only_the_pieces_whose_worker_holds_reference_or_answering_lab_code_are_withheld():
    from grader.judge.sources import withheld

    held = {(p, part): bool(withheld(p, True, part)) for p in PIECES for part in ("units", "training")}
    assert {k for k, v in held.items() if v} == {(p, part) for p in ("additive", "luong", "decoder")
                                                 for part in ("units", "training")}
    assert "baseline encoder" in withheld("luong", True, "training") and "baseline" not in withheld("luong", True, "units")
    assert not any(withheld(p, False, "all") for p in PIECES)  # public checks: the student's own files only


def test_an_exception_from_a_withheld_worker_keeps_only_a_built_in_type_and_a_line_of_the_students_file(withholding):
    from grader.judge.plugin import explain
    from grader.judge.verdicts import student_failure
    from grader.judge.workers import RemoteError

    def said(kind="error", type_name="ValueError", where=" (in decoder.py, line 12, in " + STOLEN + ")") -> str:
        return str(student_failure(RemoteError(kind, type_name, STOLEN, where), "forward_step"))

    assert said() == "forward_step raised ValueError (in decoder.py, line 12); its message is withheld"
    assert said(type_name="Leak_ZQCANARY") == ("forward_step raised an exception of a class of its own (in decoder.py, "
                                               "line 12); its message is withheld")
    assert said(where=" (in additive.py, line 12, in forward)") == "forward_step raised ValueError; its message is withheld"
    assert said(where=" (in decoder.py, line 51, in f)") == "forward_step raised ValueError; its message is withheld"
    assert said(kind="exit") == "your code called sys.exit(); return a value instead of exiting"
    assert explain(student_failure(RemoteError("not_implemented", "NotImplementedError", STOLEN, ""), "x"), None) == \
        "your code raised NotImplementedError; its message is withheld"
    stub = "piece 'decoder': write AttnDecoder.forward_step"
    assert explain(NotImplementedError(stub), None) == f"not implemented yet ({stub})"
    assert explain(KeyError(STOLEN), None) == "the grader could not run this case (KeyError); please report it"
    assert withholding.take_dropped() and not withholding.take_dropped()  # the record says so, once


def test_a_count_left_from_an_earlier_configuration_marks_no_case_withheld(withholding):
    withholding.hide(STOLEN, "")  # something withheld, never taken by a record
    withholding.configure(True, "decoder.py", "x = 1\n" * 50)
    assert not withholding.take_dropped()  # the next case's record: nothing of its own was withheld
    withholding.hide(STOLEN, "")
    withholding.configure(False)
    assert not withholding.take_dropped()  # nor where nothing is withheld at all


def test_an_answer_from_a_withheld_worker_is_named_without_its_class_shape_length_or_ending(withholding):
    from grader.judge import verdicts
    from grader.judge.workers import import_message, Lost, RemoteError, WorkerLost
    from grader.worker.wire import Opaque

    def failure(fn, *args) -> str:
        with pytest.raises(verdicts.CaseFailure) as e:
            fn(*args)
        return str(e.value)

    import torch

    assert "Leak_" not in failure(verdicts.tensor, Opaque("Leak_ZQCANARY"), "logits", (3, 11))
    assert "90, 81" not in failure(verdicts.tensor, torch.zeros(0, 90, 81, 67), "logits", (3, 11))
    assert "31337" not in failure(verdicts.pair, tuple(range(31337)), "the state")
    assert [withholding.lost(WorkerLost(m, kind)) for m, kind in (
        ("crashed with signal 10 (SIGUSR1)", Lost.CRASHED), ("exited early (exit code 90)", Lost.EXITED),
        (f"sent an unknown tag {STOLEN[:40]!r}", Lost.MALFORMED), ("timed out", Lost.TIMED_OUT),
        ("was stopped", Lost.STOPPED), ("is gone", Lost.GONE))] == \
        ["crashed", "exited early", "sent something that is not an answer", "timed out", "was stopped", "is gone"]
    broken = "def f(:\n    pass\n"
    assert import_message("decoder.py", RemoteError("error", "SyntaxError", STOLEN, " at line 1"), broken) == \
        "decoder.py has a syntax error at line 1: invalid syntax"  # the judge's own compile of the student's file
    assert import_message("decoder.py", RemoteError("error", "SyntaxError", STOLEN, " at line 1"), "x = 1\n") == \
        "importing decoder.py raised SyntaxError; its message is withheld"


def test_how_a_worker_was_lost_is_told_by_its_kind_never_by_its_words(withholding):
    from grader.judge.plugin import explain, grader_fault, timed_out
    from grader.judge.workers import Lost, WorkerLost

    # the words a kind is said in are the worker's own where they can be: they decide nothing
    assert withholding.lost(WorkerLost("timed out", Lost.MALFORMED)) == "sent something that is not an answer"
    assert withholding.lost(WorkerLost(f"sent {STOLEN}", Lost.CRASHED)) == "crashed"
    assert withholding.lost(WorkerLost(f"crashed with signal {STOLEN}", Lost.EXITED)) == "exited early"
    assert withholding.lost(WorkerLost("is gone " + STOLEN, Lost.GONE)) == "is gone " + STOLEN  # the judge's words
    assert all(withholding.lost(WorkerLost(STOLEN, kind)) == STOLEN or STOLEN not in withholding.lost(WorkerLost(STOLEN, kind))
               for kind in Lost)
    assert timed_out(WorkerLost("anything", Lost.TIMED_OUT)) and not timed_out(WorkerLost("timed out", Lost.STOPPED))
    assert grader_fault(WorkerLost("no words of a server", Lost.SERVER)) and not grader_fault(WorkerLost("the worker server",
                                                                                                      Lost.EXITED))
    assert explain(WorkerLost("exited early (exit code 3)", Lost.EXITED), None) == \
        "your code exited early: the process running it ended before answering"


def test_without_withholding_an_exception_is_shown_as_it_was_raised():
    from grader.judge.verdicts import student_failure
    from grader.judge.workers import RemoteError

    e = RemoteError("error", "ValueError", "my own message", " (in encoder.py, line 3, in forward)")
    assert str(student_failure(e, "forward")) == "forward raised ValueError: my own message (in encoder.py, line 3, in forward)"
