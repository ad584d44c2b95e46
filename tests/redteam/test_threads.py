"""Threads: a thread started by the piece is jailed like the worker, and a thread bomb stops at the worker's
own limit."""
from __future__ import annotations

import re
from textwrap import dedent, indent

import pytest

from helpers import QUICK

from .harness import full_marks, hostile, judge, only_wrong_values, stealing_context

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


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


def test_a_thread_bomb_stops_at_the_workers_own_limit_and_costs_the_neighbour_nothing(lab, arena):
    bomb = """
import threading as _th
_stop = _th.Event()
_n = 0
_th.stack_size(65536)
try:
    for _ in range(5000):
        _th.Thread(target=_stop.wait, daemon=True).start()
        _n += 1
except RuntimeError:
    pass
print("THREADS " + str(_n))
_stop.set()
"""
    g = judge(lab(files={"encoder": hostile("encoder", arena, end=bomb)}), ["encoder", "context"], QUICK)
    started = int(next(ln for ln in g.output.splitlines() if "THREADS " in ln).split("THREADS ", 1)[1])
    assert started < 300, f"a worker started {started} threads"  # the jail's limit is 256 tasks
    full_marks(g, "encoder", "context")
    arena.assert_unharmed(g.everything)
