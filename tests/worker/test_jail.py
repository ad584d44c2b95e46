"""The worker's jail on its own: each layer refuses what it should, in a forked child like a worker."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from grader import ROOT
from grader.worker import jail
from grader.worker.worker_forkserver import readable_paths

try:  # imported before any jail, as the worker server's warm-up does: a jailed child could not load it
    import pyseccomp  # noqa: F401
except (ImportError, OSError):
    pass

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the jail's layers are Linux's")


def in_jail(probe, drop_uid: bool = False) -> dict:
    """Fork, jail the child as the worker server does, run `probe()` there and return what it reports."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.dup2(w, 3)
            if drop_uid:
                jail._world_readable = lambda path: True  # the interpreter stays open: it is already loaded
            missing = jail.apply((0, 1, 2, 3), jail.JailLimits(memory_gb=2, cpu_seconds=60), readable_paths(ROOT))
            try:
                out = {"missing": missing, **probe()}
            except BaseException as e:  # noqa: BLE001 - reported to the test, which fails with it
                out = {"missing": missing, "error": repr(e)}
            os.write(3, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def attempt(fn) -> str:
    try:
        fn()
        return "allowed"
    except OSError as e:
        return f"refused ({e.errno})"


def test_the_jail_refuses_exec_fork_sockets_signals_and_the_labs_files(tmp_path):
    sentinel = subprocess.Popen(["sleep", "60"])
    secret = ROOT / "reference" / "encoder.py"
    try:
        got = in_jail(lambda: {
            "exec": attempt(lambda: os.execv("/bin/true", ["true"])),
            "fork": attempt(os.fork),
            "socket": attempt(lambda: socket.socket()),
            "signal another process": attempt(lambda: os.kill(sentinel.pid, 15)),
            "signal itself (0)": attempt(lambda: os.kill(os.getpid(), 0)),
            "read the reference": attempt(lambda: open(secret).read()),
            "list the temporary folder": attempt(lambda: os.listdir("/tmp")),
            "write a file": attempt(lambda: open(tmp_path / "x", "w").write("x")),
            "read another process's environment": attempt(lambda: open(f"/proc/{os.getppid()}/environ").read()),
            "read the interpreter's library": attempt(lambda: open(os.__file__).read(10)),
            "open descriptors": [fd for fd in range(64) if attempt(lambda fd=fd: os.fstat(fd)) == "allowed"],
        })
        assert sentinel.poll() is None, "the sentinel was signalled"
    finally:
        sentinel.kill()
    assert not (tmp_path / "x").exists()
    assert got["open descriptors"] == [0, 1, 2, 3], got  # everything the judge_server held is closed
    if "seccomp" not in got["missing"]:
        for what in ("exec", "fork", "socket", "signal another process"):
            assert got[what].startswith("refused"), (what, got)
        assert got["signal itself (0)"] == "allowed"
    if "landlock" not in got["missing"]:
        for what in ("read the reference", "list the temporary folder", "write a file", "read another process's environment"):
            assert got[what].startswith("refused"), (what, got)
        assert got["read the interpreter's library"] == "allowed"
    assert got["missing"] != ["seccomp", "landlock", "network namespace"] or sys.platform != "linux"


def test_threads_started_in_the_jail_are_jailed_too():
    def probe():
        import threading

        result = {}

        def run():
            result["read"] = attempt(lambda: open(ROOT / "grader" / "cases" / "test_encoder.py").read())
            result["fork"] = attempt(os.fork)

        t = threading.Thread(target=run)
        t.start()
        t.join()
        return result

    got = in_jail(probe)
    if "landlock" not in got["missing"]:
        assert got["read"].startswith("refused"), got
    if "seccomp" not in got["missing"]:
        assert got["fork"].startswith("refused"), got


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to nobody needs root")
def test_started_as_root_the_worker_runs_as_nobody_without_a_network():
    def probe():
        try:  # listing the interfaces opens a socket, which seccomp refuses
            interfaces = sorted(n for _, n in socket.if_nameindex())
        except PermissionError:
            interfaces = "refused"
        try:
            netns = os.readlink("/proc/self/ns/net")
        except OSError as e:
            netns = f"unreadable: {e}"
        return {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "interfaces": interfaces,
                "netns": netns}

    got = in_jail(probe, drop_uid=True)
    assert "error" not in got, got
    assert (got["uid"], got["gid"], got["groups"]) == (jail.NOBODY, jail.NOBODY, [])
    if "seccomp" not in got["missing"]:
        assert got["interfaces"] == "refused", got
    elif "network namespace" not in got["missing"]:
        assert got["interfaces"] == ["lo"], got
    if "network namespace" not in got["missing"]:  # a namespace of its own, whatever seccomp lets it list
        assert got["netns"].startswith("net:[") and got["netns"] != os.readlink("/proc/self/ns/net"), got


def test_limits_cap_memory_and_file_size():
    def probe():
        import resource

        return {"as": resource.getrlimit(resource.RLIMIT_AS)[0], "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}

    got = in_jail(probe)
    assert got["as"] == 2 * 2**30 and got["fsize"] == 0 and got["nofile"] == jail.JailLimits().open_files
