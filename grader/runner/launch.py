"""Run one piece's hidden cases in a judge process and turn its signed records into case results.

The judge (a child forked by grader.runner.judge_forkserver) runs the cases and asks jailed workers to run the
student's code; this module only reads the records (verifying each signature) and scores them from
the manifest, so a crash, hang, exit or tamper attempt costs that piece alone.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.core import host
from grader.core.childenv import child_env
from grader.core.host import StartError, signal_name
from grader.judge.sources import withheld as withheld_reason
from grader.runner import layout
from grader.runner.layout import CASES
from grader.runner.results import CaseResult, Limits, PieceRun, Status
from grader.runner.judge_servers import JudgeServer
from grader.runner.summary import safe

OUTPUT_LIMIT = 4000  # characters of a piece's stdout/stderr kept for the report




def limit_child(memory_gb: float) -> None:
    if sys.platform == "win32":  # no preexec_fn there (popen_limits); the fork servers' judges are Linux's
        return
    os.setsid()  # its own process group, so a timeout can kill whatever it spawned
    cap = int(memory_gb * 2**30)
    try:
        host.resource.setrlimit(host.resource.RLIMIT_AS, (cap, cap))
    except (ValueError, OSError):
        pass  # not every OS allows it; the wall-clock limit still holds


def popen_limits(memory_gb: float) -> dict:
    """Popen arguments that cap a child and give it its own process group where the OS has both (POSIX)."""
    if sys.platform == "win32" or host.resource is None or not hasattr(os, "setsid"):
        return {}
    return {"preexec_fn": lambda: limit_child(memory_gb)}


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a child and whatever it started: its process group on POSIX, its process tree on Windows."""
    try:
        if os.name == "nt":
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True, timeout=30)
        elif hasattr(os, "killpg"):
            os.killpg(proc.pid, 9)  # SIGKILL
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        proc.kill()
    except OSError:
        pass


def key_pipe(key: str) -> int:
    """A pipe's read end holding `key`: the child reads it via --attnlab-key-fd, nothing else sees it."""
    r, w = os.pipe()
    os.write(w, key.encode() + b"\n")
    os.close(w)
    return r


# pytest's built-in plugins a judge does without: its cases use none of their fixtures or options, and each costs
# every judge its registration and hooks. unraisableexception and threadexception: their end-of-session gc.collect()
# calls cost more than all the cases of a quick piece. warnings stays: without it a warning would print into the output.
OFF = ("cacheprovider", "terminal", "unraisableexception", "threadexception", "logging", "doctest", "pastebin",
       "junitxml", "legacypath", "tmpdir", "monkeypatch", "recwarn", "setuponly", "setupplan", "stepwise", "debugging",
       "unittest", "subtests")


def _spawn(argv: list[str], cwd: str, key: str, output: Path, limits: Limits) -> tuple[int, str]:
    """A fresh interpreter per piece: slower to start than a judges' fork server, used where there is none (no fork)
    or it died. The key goes in on standard input, which every OS can hand a child."""
    with open(output, "wb") as out:
        try:
            proc = subprocess.Popen(host.python("pytest", "--attnlab-key-fd", "0", *argv), stdin=subprocess.PIPE,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=child_env(),
                                    **popen_limits(limits.memory_gb))
        except OSError as e:
            raise StartError(f"cannot start {sys.executable} ({e.strerror or e})") from None
        try:
            proc.stdin.write(key.encode() + b"\n")
            proc.stdin.close()
        except OSError:
            pass  # it died at once: its exit code and output say why
        try:
            return proc.wait(timeout=limits.piece_timeout), "ok"
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return proc.wait(), "timeout"


class ProgressWatch:
    """Reads the judge's progress lines (a training case's step and validation accuracy) while the piece
    runs and hands each to `show`. Display only: the score never depends on them."""

    def __init__(self, path: Path, show) -> None:
        self.path, self.show, self.done, self.seen = path, show, threading.Event(), 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.done.wait(0.5):
            self._read()

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.seen)
                chunk = f.read(1 << 16)
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.seen += len(complete)
        for line in complete.splitlines():
            try:
                event = json.loads(line)
                shown = {k: float(event[k]) for k in ("step", "max_steps", "seconds")}
                if "acc" in event:  # only where the case decoded
                    shown["acc"] = float(event["acc"])
                self.show(shown)
            except (ValueError, KeyError, TypeError):
                continue

    def stop(self) -> None:
        """Stop polling, then read once more: the last chunk's line (often the only one) was written after the
        last poll."""
        self.done.set()
        self.thread.join(timeout=2)
        if not self.thread.is_alive():  # never two readers of one file position
            self._read()


def run_piece(
    piece: str, expected: list[dict], submission: Path, reference: Path | None, seed: str, limits: Limits,
    judge_server: JudgeServer | None = None, cases: Path = CASES, on_progress=None, part: str = "all",
) -> PieceRun:
    """Run `piece`'s cases (`part`: all, units or training; see `selected`) in a fresh process and return one
    result per expected case; on_progress(event) hears of a training case's progress (step, max_steps, acc,
    seconds) while it runs."""
    part = "units" if limits.quick else part
    key = secrets.token_hex(32)
    with tempfile.TemporaryDirectory(prefix="attnlab-") as tmp:
        argv = judge_argv(piece, Path(tmp), submission, reference, seed, limits, cases, part)
        start = time.perf_counter()
        watch = ProgressWatch(Path(tmp) / "progress.jsonl", on_progress) if on_progress else None
        code, status = _launch(argv, tmp, key, Path(tmp) / "output.txt", limits, judge_server)
        seconds = time.perf_counter() - start
        if watch:
            watch.stop()
        got = _read_records(Path(tmp) / "records.jsonl", key)
        # the tail of what the submission printed (pytest's own reporter is off in the child); none of it where the
        # piece's workers held reference code, whatever the judge wrote there (grader.judge.withhold)
        reason = withheld_reason(piece, reference is not None, part)
        output = _tail(Path(tmp) / "output.txt")
    # the report says why when something was held back: prints, or a message that left out what the worker said
    withheld = reason if reason and (output.strip() or any(r.get("withheld") for r in got.values())) else ""
    _raise_fault(piece, got, status, code, "its output is withheld" if reason else _last_line(output))
    if status == Status.OK and code < 0:
        status = Status.CRASHED
    results = scored(selected(expected, limits, part), got, _why_missing(status, code, limits))
    if status == Status.OK and code not in (0, 1) and all(c.passed for c in results):
        status = Status.EXITED
    jail = sorted({str(x) for rec in got.values() for x in rec.get("jail", [])})
    return PieceRun(piece, results, "" if reason else output, seconds, status, jail, withheld)


def judge_argv(piece: str, tmp: Path, submission: Path, reference: Path | None, seed: str, limits: Limits,
               cases: Path, part: str) -> list[str]:
    """pytest's arguments for a judge of `piece`: the plugin and its options, its own ini in `tmp` (the case timeout),
    and the piece's cases file."""
    ini = tmp / "pytest.ini"
    method = "signal" if hasattr(signal, "SIGALRM") else "thread"  # Windows has no alarm signal
    ini.write_text(f"[pytest]\ntimeout = {limits.case_timeout:g}\ntimeout_method = {method}\n")
    return [
        "-p", "grader.judge.plugin", "-p", "pytest_timeout", "-s",
        *(a for name in OFF for a in ("-p", f"no:{name}")),
        "--rootdir", str(tmp), "-c", str(ini), "--attnlab-submission", str(submission), "--attnlab-piece", piece,
        "--attnlab-records", str(tmp / "records.jsonl"), "--attnlab-seed", seed,
        "--attnlab-reference", str(reference or ""), "--attnlab-memory-gb", f"{limits.memory_gb:g}",
        "--attnlab-piece-timeout", f"{limits.piece_timeout:g}", "--attnlab-progress", str(tmp / "progress.jsonl"),
        "--attnlab-part", part, "--attnlab-require-jail", ",".join(layout.required_jail()),
        str(cases / f"test_{piece}.py"),
    ]


def _launch(argv: list[str], tmp: str, key: str, out_path: Path, limits: Limits, judge_server: JudgeServer | None
            ) -> tuple[int, Status]:
    """Run the judge on the judges' server where there is one that lives (or was stopped: it raises Stopped), else in a
    fresh interpreter; (its exit code, how it ended)."""
    if judge_server is not None and (judge_server.alive() or judge_server.stopped or judge_server.signalled()):
        try:
            code, status = judge_server.run(argv, tmp, key, out_path, limits)
            return code, Status(status)
        except (EOFError, OSError, TypeError):  # the server died under us: fall back to a fresh process
            pass
    code, status = _spawn(argv, tmp, key, out_path, limits)
    return code, Status(status)


def _raise_fault(piece: str, got: dict[str, dict], status: Status, code: int, said: str) -> None:
    """StartError where the grader itself failed: a judge's own fault record, or a judge gone before any case ran
    (never the student's: their failures are the cases')."""
    fault = next((str(r["fault"]) for r in got.values() if r.get("fault")), None)
    if status == Status.OK and not got and code not in (0, 1):
        fault = f"its judge process exited with code {code} before any case ran: {said}"
    if fault:
        raise StartError(f"piece {piece}: {safe(fault, 400)}")


def _why_missing(status: Status, code: int, limits: Limits) -> str:
    """What a case the judge never reported failed of, by how the judge ended."""
    if status == Status.TIMEOUT:
        return f"timed out: the piece ran past its {limits.piece_timeout:g} s limit and was stopped"
    if status == Status.CRASHED:
        return f"crashed with signal {-code} ({signal_name(-code)})" if code < 0 else ""
    return f"did not report: the process exited early (exit code {code})"


def scored(expected: list[dict], got: dict[str, dict], why: str) -> list[CaseResult]:
    """Each expected case's result from the judge's signed record of it; `why` for a case it never reported."""
    out = []
    for case in expected:
        rec = got.get(case["case"])
        if rec is None:
            out.append(CaseResult(case["case"], case["points"], False, why))
            continue
        skipped = bool(rec.get("skipped")) and case["points"] == 0  # only point-free cases may be skipped
        passed = bool(rec.get("passed")) and not rec.get("skipped")
        message = rec.get("message", "") if not passed else ""
        if rec.get("skipped") and case["points"]:
            message = "skipped unexpectedly; a case worth points must run"
        out.append(CaseResult(case["case"], case["points"], passed, message, skipped, float(rec.get("duration", 0))))
    return out


def selected(expected: list[dict], limits: Limits, part: str = "all") -> list[dict]:
    """The manifest's cases that this run grades: all of them, the units (all but the slow ones; always in
    quick mode) or the training cases (the slow ones)."""
    if limits.quick or part == "units":
        return [c for c in expected if not c.get("slow")]
    return [c for c in expected if part == "all" or c.get("slow")]


def max_score(pieces: list[str], limits: Limits) -> int:
    """What a grade of `pieces` with these limits is out of (all their cases, or a quick run's), from the cases'
    manifest: known before anything is graded (an error row of `grade batch` carries it)."""
    from grader.runner import manifest

    expected = manifest.read(layout.current().manifest)
    return sum(c["points"] for p in pieces for c in selected(expected.get(p, []), limits))


def _tail(path: Path) -> str:
    """The end of the piece's output file, read without loading all of it."""
    if not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - OUTPUT_LIMIT * 4))
        return f.read().decode("utf-8", "replace")[-OUTPUT_LIMIT:]


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "it printed nothing"


def _read_records(path: Path, key: str) -> dict[str, dict]:
    """Records whose signature checks out, by case name; anything else in the file is ignored."""
    found: dict[str, dict] = {}
    if not path.exists():
        return found
    for line in path.read_text(errors="replace").splitlines():
        try:
            wrapper = json.loads(line)
            body, mac = wrapper["record"], wrapper["mac"]
            want = hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(want, mac):
                continue
            rec = json.loads(body)
            found.setdefault(rec["case"], rec)  # the first record of a case stands
        except (ValueError, KeyError, TypeError):
            continue
    return found
