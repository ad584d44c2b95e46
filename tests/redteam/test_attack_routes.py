"""Routes new since the last red-team round: the worker's trusted `bmm` command (the yardstick of the context's
no-loop case), the `@lab:module.Class` lookup by which the judge has a worker build a lab model, and the public run
(a release without its seal key) of a piece that has no public check.

Each test asserts the safe behaviour. Four holes this round found (the bmm replay, both routes of the @lab: lookup,
the stale public manifest) failed their tests on the code before they were closed; the other attacks failed already.

bmm: the worker's bmm ran on the very inputs of the student's timed call, just before it, in the same process. Code
that kept what that product returned (wrapping the held `runtime._BMM`, or a TorchFunctionMode, which sees every torch
call in the process without touching a grader module) answered the timed call from it at once and looped everywhere
else: a loop over the positions kept the no-loop points (9/9; the same loop alone gets 7/9). The worker's product now
runs on other fresh inputs of the same shape, so there is nothing to replay. Breaking the
worker's bmm (it exits, or never returns) costs only its own piece's no-loop points; threads busy only between the
student's calls slow the student's own request too; an answer a thread fills in after the call returns is checked as
it was sent.

@lab: the lab modules are executed in the worker before the student's file, and `sys.modules` and the module objects
are the student's to change: the worker built whatever class the student put at `grader.lab.luong_model.Seq2SeqLuong`
(the judge then scores the parameters it gets back with its own model and the reference's attention, and only once the
unit cases passed, so the gain was bounded by what the student could have written anyway: an attention right at the
unit cases' sizes but wrong on long sentences earned the 5 training points, 13/13 instead of 8/13). The worker now
looks the class up in a copy of the module's names taken before the student's code ran. What stands, as
docs/threat-model.md says of every worker: the class's own methods are patchable in the student's process. Nothing an
earlier piece imports, and no student file named like a lab module, reaches another piece's worker.

Public run: a piece the public checks leave to the graded run says "no public check for this piece" in every format,
scores 0/0, runs none of the student's code for that piece (its file still runs, jailed, in a neighbour's point-free
case), and reads no sealed file. A public manifest with no entry at all for a piece (a stale one: `grade manifest`
writes every piece) ended `grade PIECE` in a KeyError traceback (instructor side); it is now one line naming it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.release.build import student
from grader.runner.results import Limits

from helpers import QUICK, REFERENCE
from .harness import CONTEXT_SOLUTION, FULL, LOOSE, MANIFEST, full_marks, hostile, judge

pytestmark = pytest.mark.slow  # every test here grades submissions in jailed workers or builds a release

NO_LOOP = "test_it_runs_no_python_loop_over_positions"
TRAINED = "test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences"
ALL_CASES = Limits(case_timeout=900, piece_timeout=1200, memory_gb=6, quick=False)  # the training cases too
EVERY = {p: sum(c["points"] for c in cases) for p, cases in MANIFEST.items()}  # a full run's maximum
FOR_LOOP = """    out = encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))
    for i in range(alpha.size(1)):  # a Python loop over positions
        out = out + alpha[:, i, None] * encoder_outputs[:, i]
    return out
"""


def loses_exactly_the_no_loop_points(g, words: str) -> None:
    msgs = g.messages("context")
    assert list(msgs) == [NO_LOOP], msgs
    points = next(c["points"] for c in MANIFEST["context"] if c["case"] == NO_LOOP)
    assert g.score("context") == FULL["context"] - points, msgs
    assert words in msgs[NO_LOOP], msgs


# ---- 1. the worker's trusted bmm ----

# Each keeps the last answer of the worker's own product; the body below answers from it when the inputs are the ones
# that product just ran on (the timed calls), and runs FOR_LOOP everywhere else (the value, gradient and edge cases).
REPLAYS = {
    "the worker's held _BMM wrapped (through sys.modules)": '''
import sys as _sys

_rt = _sys.modules["grader.worker.runtime"]
_real_bmm = _rt._BMM
_LAST = {}


def _keeping_bmm(a, e):  # the worker's trusted product, unchanged, its answer kept
    out = _real_bmm(a, e)
    _LAST["enc"], _LAST["out"] = e, out
    return out


_rt._BMM = _keeping_bmm
''',
    "a TorchFunctionMode over the whole process (no grader module touched)": '''
from torch.overrides import TorchFunctionMode as _Mode

_LAST = {}


class _Keep(_Mode):  # sees every torch call in the process, the worker's own bmm included
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "bmm" and len(args) == 2:
            _LAST["enc"], _LAST["out"] = args[1], out
        return out


_Keep().__enter__()
''',
}
REPLAY_BODY = """    e = _LAST.get("enc")
    if e is not None and e.shape == encoder_outputs.shape and torch.equal(e[:, :3], encoder_outputs[:, :3]):
        return _LAST["out"].squeeze(1)  # the worker's own bmm ran on these very inputs just before this call
""" + FOR_LOOP


@pytest.mark.parametrize("how", list(REPLAYS))
def test_a_loop_that_replays_the_workers_own_bmm_loses_the_no_loop_points(lab, arena, how):
    src = hostile("context", arena, call="_payload()\n", top=REPLAYS[how], edits=((CONTEXT_SOLUTION, REPLAY_BODY),))
    g = judge(lab(files={"context": src}), ["context"])
    arena.assert_unharmed(g.everything)
    loses_exactly_the_no_loop_points(g, "Python loop")  # 9/9 while the worker's bmm ran on the timed call's inputs


BROKEN_BMM = {
    "exits": ('''
import sys as _sys

_rt = _sys.modules["grader.worker.runtime"]


def _broken(*a, **k):
    raise SystemExit(3)


_rt._BMM = _broken  # the worker's trusted product now exits, and its squeeze is gone
_rt._SQUEEZE = None
''', "sys.exit(3)", QUICK),
    "never returns": ('''
import sys as _sys
import time as _time

_sys.modules["grader.worker.runtime"]._BMM = lambda *a, **k: _time.sleep(10 ** 6)
''', "timed out", LOOSE),
}


@pytest.mark.parametrize("how", list(BROKEN_BMM))
def test_breaking_the_workers_bmm_costs_only_its_own_no_loop_points(lab, arena, how):
    end, words, limits = BROKEN_BMM[how]
    src = hostile("context", arena, call="_payload()\n", end=end)
    g = judge(lab(files={"context": src}), ["additive", "context", "luong"], limits=limits)
    loses_exactly_the_no_loop_points(g, words)  # a vectorised answer, its yardstick broken: that case only
    full_marks(g, "additive", "luong")  # the pieces around it, in their own workers, keep everything
    arena.assert_unharmed(g.everything)


HOGS = '''
import threading as _th
import time as _t

_quiet = [False]


def _burn_gil():  # Python bytecode: the worker's own work (the wire, its bmm) waits for the GIL
    x = 0
    while True:
        if _quiet[0]:
            _t.sleep(0.0002)
            continue
        for _ in range(2000):
            x += 1


def _burn_core():  # torch work without the GIL: the other core, where the judge times its own product
    a = torch.randn(192, 192)
    while True:
        if _quiet[0]:
            _t.sleep(0.0002)
            continue
        a = torch.mm(a, a)
        a = a / a.norm()


for _f in (_burn_gil, _burn_gil, _burn_gil, _burn_core, _burn_core):
    _th.Thread(target=_f, daemon=True).start()
'''
HOGS_BODY = """    _quiet[0] = True  # the machine to itself while this call runs, busy otherwise
    try:
        return torch.stack([alpha[b] @ encoder_outputs[b] for b in range(alpha.size(0))])
    finally:
        _quiet[0] = False
"""


def test_a_loop_over_the_sentences_with_threads_that_are_busy_only_between_its_calls_loses_the_no_loop_points(
        lab, arena):
    """Threads that load the GIL and the other core except while the student's function runs: the worker's bmm (and
    the judge's own product beside it) slowed, its own call not. The request's decoding waits too, before the threads
    hear to stop: the loop measured 22 to 23 times bmm's time, where it measures 23 without them (or, on a busy
    machine, the case ran out of time, and the slowed worker may lose the device case after it too)."""
    src = hostile("context", arena, call="_payload()\n", top=HOGS, edits=((CONTEXT_SOLUTION, HOGS_BODY),))
    g = judge(lab(files={"context": src}), ["context"])
    msgs = g.messages("context")
    assert NO_LOOP in msgs and ("Python loop" in msgs[NO_LOOP] or "timed out" in msgs[NO_LOOP]), msgs
    assert g.score("context") <= FULL["context"] - 2, msgs  # never more than honest code with the same loop
    arena.assert_unharmed(g.everything)


LATER = '''
import threading as _threading


def _fill(out, alpha, enc):  # the loop, after the answer has gone back
    for i in range(alpha.size(1)):
        out += alpha[:, i, None] * enc[:, i]
'''
LATER_BODY = """    if alpha.numel() > 10_000:  # the timed calls: answer at once, do the work afterwards
        out = encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))
        _threading.Thread(target=_fill, args=(out, alpha.detach(), encoder_outputs.detach()), daemon=True).start()
        return out
""" + FOR_LOOP


def test_an_answer_a_thread_fills_in_after_the_call_returns_loses_the_no_loop_points(lab, arena):
    src = hostile("context", arena, call="_payload()\n", top=LATER, edits=((CONTEXT_SOLUTION, LATER_BODY),))
    g = judge(lab(files={"context": src}), ["context"])
    # its loop runs at the small sizes where the calls are counted (issue 39), before a timed call's answer, encoded
    # as it stood when the call returned, differs from the reference
    loses_exactly_the_no_loop_points(g, "a Python loop over the sentences or the positions")
    arena.assert_unharmed(g.everything)


# ---- 2. the @lab:module.Class lookup ----

SWAP_RAISING = '''
import sys as _sys

_lm = _sys.modules.get("grader.lab.luong_model")  # only the training worker holds the lab modules


class _Mine(_lm.Seq2SeqLuong if _lm is not None else object):  # the student's class, where the lab's was
    def __init__(self, *a, **k):
        raise ValueError("the student's class was built in place of the lab's")


if _lm is not None:
    _lm.Seq2SeqLuong = _Mine
'''


def test_the_worker_builds_the_labs_own_luong_model_not_a_class_put_in_its_place(lab, arena):
    g = judge(lab(files={"luong": hostile("luong", arena, end=SWAP_RAISING)}), ["luong"], limits=ALL_CASES)
    arena.assert_unharmed(g.everything)
    assert g.score("luong") == EVERY["luong"], g.messages("luong")  # 8/13 while the lookup was on the live module


# the reference's scaling line, made uniform attention on sentences longer than any unit case's (T_src 7 at most)
WRONG_WHEN_LONG = ("        scores = scores / d**0.5  # keeps the softmax out of saturation as d grows\n",
                   "        scores = scores / d**0.5 if encoder_outputs.size(1) <= 8 else scores * 0\n")
SWAP_RIGHT = '''
import sys as _sys

_lm = _sys.modules.get("grader.lab.luong_model")


class _Right(torch.nn.Module):  # Luong's scaled dot attention, used only inside the lab's model
    def forward(self, enc, q, mask=None):
        s = torch.bmm(enc, q.unsqueeze(-1)).squeeze(-1) / enc.size(-1) ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        a = torch.softmax(s, dim=-1)
        return torch.bmm(a.unsqueeze(1), enc).squeeze(1), a


if _lm is not None:
    class _Mine(_lm.Seq2SeqLuong):  # the lab's model, the LuongDotAttention the judge passed dropped
        def __init__(self, s, t, e, h, attention):
            super().__init__(s, t, e, h, _Right())

    _lm.Seq2SeqLuong = _Mine
'''


def test_an_attention_wrong_on_long_sentences_earns_no_training_points_by_swapping_the_labs_model(
        lab, arena):
    src = hostile("luong", arena, edits=(WRONG_WHEN_LONG,), end=SWAP_RIGHT)
    g = judge(lab(files={"luong": src}), ["luong"], limits=ALL_CASES)
    arena.assert_unharmed(g.everything)
    assert TRAINED in g.messages("luong"), g.messages("luong")  # 13/13 while the lookup was on the live module


POISON = '''
import sys as _sys
import types as _types


class _Fake:
    def __init__(self, *a, **k):
        raise ValueError("an earlier piece's module was built")


for _stem in ("luong_model", "train", "toy", "baseline"):  # planted in this worker's sys.modules and grader.lab
    _m = _types.ModuleType("grader.lab." + _stem)
    _m.Seq2SeqLuong = _m.Trainer = _Fake
    _sys.modules["grader.lab." + _stem] = _m
    if "grader.lab" in _sys.modules:
        setattr(_sys.modules["grader.lab"], _stem, _m)
'''
NAMED_LIKE_LAB = 'raise SystemExit("a student file named like a lab module ran")\n'


def test_an_earlier_pieces_planted_modules_and_files_named_like_lab_modules_reach_no_lab_model(lab, arena):
    files = {"context": hostile("context", arena, end=POISON),
             "luong_model": arena.prelude() + "\n_payload()\n" + NAMED_LIKE_LAB, "train": NAMED_LIKE_LAB}
    g = judge(lab(files=files), ["context", "luong"], limits=ALL_CASES)
    assert g.score("context") == EVERY["context"] and g.score("luong") == EVERY["luong"], g.report
    arena.assert_unharmed(g.everything)


# ---- 3. the public run of a piece without public checks ----

QUIET = "context"  # the piece this release's public checks leave to the graded run
FORMATS = ("text", "json", "markdown", "classroom", "gradescope", "junit")


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A student release whose public checks have nothing for QUIET (as a new piece's would), without its key."""
    rel, _ = student(tmp_path_factory.mktemp("rel") / "lab")
    manifest = rel / "grader" / "public" / "manifest.json"
    data = json.loads(manifest.read_text())
    data[QUIET] = []
    manifest.write_text(json.dumps(data, indent=1))
    (rel / "grader" / "public" / f"test_{QUIET}.py").unlink()
    return rel


def public(rel: Path, sub: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNLAB_", "PYTHON"))}
    env["PYTHONPATH"] = str(rel)
    return subprocess.run([sys.executable, "-m", "grader", *args, "--submission", str(sub)], cwd=rel, env=env,
                          capture_output=True, text=True, timeout=300)


def solved(rel: Path, where: Path) -> Path:
    shutil.copytree(rel / "exercises", where)
    for path in REFERENCE.glob("*.py"):
        shutil.copyfile(path, where / path.name)
    return where


def test_a_piece_without_public_checks_says_so_in_every_format_and_earns_nothing(release, tmp_path):
    sub = solved(release, tmp_path / "sub")
    for fmt in FORMATS:
        done = public(release, sub, QUIET, "--format", fmt)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (fmt, done.stdout + done.stderr)
        if fmt == "text":
            assert "no public check for this piece" in done.stdout and "Total: 0/0" in done.stdout, done.stdout
        if fmt == "json":
            report = json.loads(done.stdout)
            assert (report["score"], report["max_score"]) == (0, 0), report
            assert [(p["name"], p["score"], p["cases"]) for p in report["pieces"]] == [(QUIET, 0, [])], report
    stub = public(release, release / "exercises", QUIET)  # a fresh stub: the same line, not "not implemented"
    assert stub.returncode == 0 and "no public check for this piece" in stub.stdout, stub.stdout + stub.stderr


PUBLIC_HOSTILE = '''
import sys as _sys

_payload()
for _p in ("grader/sealed.bin", {sealed!r}):
    try:
        print("SEALED-BYTES", open(_p, "rb").read(16))
    except OSError as _e:
        print("SEALED-REFUSED", type(_e).__name__)
print("\\u2713 context       9/9")
print("Total: 99/99")
'''


def test_a_hostile_file_for_it_earns_nothing_and_reads_no_sealed_file(release, tmp_path, arena):
    sub = solved(release, tmp_path / "sub")
    end = PUBLIC_HOSTILE.format(sealed=str(release / "grader" / "sealed.bin"))
    (sub / f"{QUIET}.py").write_text(hostile(QUIET, arena, end=end))
    done = public(release, sub, QUIET, "additive", "--format", "json")  # additive's free case runs context.py
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    report = json.loads(done.stdout)
    pieces = {p["name"]: p for p in report["pieces"]}
    assert (pieces[QUIET]["score"], pieces[QUIET]["max_score"], pieces[QUIET]["cases"]) == (0, 0, [])
    checks = json.loads((release / "grader" / "public" / "manifest.json").read_text())["additive"]
    additive = sum(c["points"] for c in checks)
    assert (report["score"], report["max_score"]) == (additive, additive), report
    assert "SEALED-BYTES" not in done.stdout + done.stderr
    text = public(release, sub, QUIET, "additive")
    assert "Total: 99/99" not in text.stdout.replace("| Total: 99/99", ""), text.stdout  # only as the code's output
    arena.assert_unharmed()


def test_a_piece_missing_from_the_public_manifest_is_reported_not_a_traceback(release, tmp_path):
    rel = tmp_path / "rel"
    shutil.copytree(release, rel)
    manifest = rel / "grader" / "public" / "manifest.json"
    data = json.loads(manifest.read_text())
    del data[QUIET]
    manifest.write_text(json.dumps(data))
    done = public(rel, solved(rel, tmp_path / "sub"), QUIET)
    assert "Traceback" not in done.stderr and done.returncode in (0, 1, 2), done.stdout + done.stderr
    assert "has no entry for" in done.stdout + done.stderr and "grade generate" in done.stdout + done.stderr
