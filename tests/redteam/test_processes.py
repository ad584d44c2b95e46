"""Other processes: signals to the parent, the fork server, the worker server and a bystander (directly or by
way of fcntl), their limits and priority, powers over the machine, workers and cgroups left behind, and the
plots' workers."""
from __future__ import annotations

import os
import re
import resource
from pathlib import Path

import pytest

from grader.runner.results import Limits

from helpers import QUICK, REFERENCE, at_import, eventually, grade_dict, shared_judge_server

from .harness import FULL, LOOSE, each_refused, full_marks, hostile, judge, run_batch

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


def test_the_parent_and_the_grandparent_cannot_be_signalled(lab, arena):
    judge_server = shared_judge_server()
    call = f'''
        _payload()
        for _pid in (_os.getppid(), {judge_server.proc.pid}):
            for _sig in (_signal.SIGKILL, _signal.SIGTERM, _signal.SIGSTOP):
                try:
                    _os.kill(_pid, _sig)
                except OSError:
                    pass
    '''
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    assert judge_server.alive()
    arena.assert_unharmed(g.everything)


def test_another_process_cannot_be_signalled(lab):
    sub = lab(edits={"encoder": at_import("import os, signal; os.kill(os.getppid(), signal.SIGTERM)")})
    report = grade_dict(sub, ["encoder"])
    messages = {c["message"] for c in report["pieces"][0]["cases"]}
    assert any("PermissionError" in m and "not permitted" in m for m in messages), messages


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
    eventually(lambda: arena.sentinel.poll() is not None, within=0.5)  # a signal sent late has its time to land
    arena.assert_unharmed(g.everything)


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
    judge_server = shared_judge_server()
    # a judges' server just started may not have started its workers' server yet
    servers = eventually(lambda: [p for p in _children(judge_server.proc.pid)
                                  if b"grader.worker.worker_forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()],
                         within=60)
    assert len(servers) == 1
    before = _children(servers[0])
    call = "_payload()\nimport time as _time\n_time.sleep(10**6)  # no CPU spent: RLIMIT_CPU never ends it\n"
    src = hostile("context", arena, call=call)
    g = judge(lab(files={"context": src}), ["context"], Limits(case_timeout=60, piece_timeout=3, memory_gb=4, quick=True))
    assert g.score("context") == 0
    eventually(lambda: not _children(servers[0]) - before, within=5)  # the server reaps what its judge left
    left = _children(servers[0]) - before
    for pid in left:  # the workers this test left behind, by id
        os.kill(pid, 9)
    arena.assert_unharmed(g.everything)
    assert not left, f"{len(left)} worker(s) still running after their piece was stopped"


def _worker_cgroups() -> set[str]:
    from grader.worker.cgroups import roots as _roots

    found = set()
    for root in _roots():
        top = os.path.join(root, "attnlab")
        if os.path.isdir(top):
            found |= {os.path.join(top, n) for n in os.listdir(top) if n.startswith("w")}
    return found


def test_a_graded_piece_leaves_no_cgroup_behind(lab, arena):
    before = _worker_cgroups()
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n")}), ["context"], QUICK)
    full_marks(g, "context")
    assert _worker_cgroups() - before == set()


def test_the_plots_run_student_code_in_the_jail(lab, arena, tmp_path, monkeypatch):
    from grader.plots import draw

    monkeypatch.setenv(draw.STEPS_ENV, "30")
    steal = f'''
_payload()
try:
    _leak = open({str(REFERENCE / "decoder.py")!r}).read()[:40]
except OSError as _e:
    _leak = "refused " + type(_e).__name__
print("PLOTREAD " + repr(_leak))
'''
    sub = lab(files={"encoder": hostile("encoder", arena, end=steal)})
    pngs = draw.main(submission=sub, out=tmp_path / "out", timeout=600)
    assert all(p.is_file() for p in pngs)  # the honest part of the file still trains and draws
    arena.assert_unharmed()  # nothing written, spawned or signalled from the plots' workers
