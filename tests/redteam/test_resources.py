"""Memory, time and process bombs, and aborts of every kind: each costs only its own piece, or its own case."""
from __future__ import annotations

import time
from textwrap import dedent, indent

import pytest

from .harness import EDGE_B1, FULL, LOOSE, full_marks, hostile, judge

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


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
