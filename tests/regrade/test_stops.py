"""Issue 32 §2: a batch stopped by SIGTERM (Slurm or Kubernetes at a time limit or a preemption) or SIGINT (Ctrl-C)
ends every process it started, keeps the students it finished, says where it stopped and exits 143 or 130; the same
command again resumes it and writes the gradebook an uninterrupted run writes."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import ROOT

from grader.verbs.batch import WAVE

from helpers import EXERCISES, REFERENCE, eventually

ADA = "attention-lab-ada"  # a student is named after their repository
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")


def _class(root: Path) -> Path:
    for who in ("ada", "bob"):
        repo = root / f"attention-lab-{who}"
        shutil.copytree(REFERENCE, repo / "exercises")
        (repo / ".git").mkdir()
    return root


def _command(klass: Path, out: Path, quick: bool = True, jobs: int = 2) -> list[str]:
    return [sys.executable, "-m", "grader", "batch", str(klass), *(["--quick"] if quick else []), "-j", str(jobs),
            "--seed", "7", "--out", str(out)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _graded(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=False, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=600)


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every live process: pid -> (parent, start time, command line)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(errors="replace")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z":
            found[int(entry)] = (int(fields[1]), fields[19], cmdline)
    return found


def _below(root: int, procs: dict[int, tuple[int, str, str]]) -> dict[int, tuple[int, str, str]]:
    kids: dict[int, list[int]] = {}
    for pid, (parent, _, _) in procs.items():
        kids.setdefault(parent, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for pid in kids.get(todo.pop(), []):
            found[pid] = procs[pid]
            todo.append(pid)
    return found


def _stopped_midway(command: list[str], out: Path, sig: int, rows_before: int) -> tuple[subprocess.CompletedProcess,
                                                                                        float, dict, set[str]]:
    """Run `command` until its gradebook holds `rows_before` rows and a judge is grading, then send `sig`; return
    what it printed, the seconds from the signal to its exit, the process tree it had and the markers of that tree
    (its grader import folder, on every command line it started)."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT,
                            start_new_session=True)
    try:
        end = time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the batch never reached a judge with a row written"
            tree = _below(proc.pid, _processes())
            judges = [p for p, (parent, _, cmd) in tree.items() if "judge_forkserver" in cmd
                      and "judge_forkserver" in tree.get(parent, (0, "", ""))[2]]
            rows = out.read_text().count("\n") - 1 if out.is_file() else 0
            if judges and rows >= rows_before:
                break
            time.sleep(0.1)
        markers = {m for _, _, cmd in tree.values() for m in re.findall(r"\S*attnlab-imports-\w+", cmd)}
        os.kill(proc.pid, sig)
        sent = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(command, proc.returncode, stdout.decode(), stderr.decode()), took, tree, markers


def _left(tree: dict, markers: set[str]) -> list[str]:
    """The processes of `tree` still alive (the same pid and start time), or any carrying one of its markers."""
    def alive() -> list[str]:
        return [f"{pid} {cmd[-120:]}" for pid, (_, start, cmd) in _processes().items()
                if (pid in tree and tree[pid][1] == start) or any(m in cmd for m in markers)]

    # a SIGKILLed process is gone once its parent or init reaped it
    return [] if eventually(lambda: not alive(), within=3) else alive()


@pytest.mark.slow
def test_a_stopped_batch_ends_every_process_keeps_what_it_finished_and_the_same_command_resumes_it(tmp_path):
    klass = _class(tmp_path / "class")
    whole = tmp_path / "whole" / "grades.csv"
    done = _graded(_command(klass, whole))
    assert done.returncode == 0, done.stderr
    # where a run killed after ada left off: her row in the journal and her report (bob still to grade)
    out = tmp_path / "part" / "grades.csv"
    (out.parent / "grades-reports").mkdir(parents=True)
    shutil.copy(whole.with_name("grades-reports") / f"{ADA}.json", out.with_name("grades-reports") / f"{ADA}.json")
    header, *entries = whole.with_name("grades-journal.jsonl").read_text().splitlines()
    ada = [e for e in entries if json.loads(e)["row"]["student"] == ADA]
    out.with_name("grades-journal.jsonl").write_text("\n".join([header, *ada]) + "\n")

    stopped, took, tree, markers = _stopped_midway(_command(klass, out), out, signal.SIGTERM, rows_before=1)
    assert stopped.returncode == 143, stopped.stderr
    assert took < 10, f"{took:.1f} s from SIGTERM to exit"
    said = re.search(r"stopped by SIGTERM after (\d) of 2 students; rerun the same command to resume", stopped.stderr)
    assert said and int(said.group(1)) >= 1, stopped.stderr
    assert "Traceback" not in stopped.stderr, stopped.stderr
    assert markers and len(tree) >= 3, tree  # the fork servers and a judge were running
    assert not _left(tree, markers), "left running after the stop:\n" + "\n".join(_left(tree, markers))
    assert f"\n{ADA}," in out.read_text()  # the finished student's row, kept
    assert any(json.loads(e)["row"]["student"] == ADA for e in out.with_name("grades-journal.jsonl").read_text()
               .splitlines()[1:])
    assert json.loads(out.with_name("grades-manifest.json").read_text())["finished"] is False

    # Ctrl-C: the same, with the shell's code for SIGINT
    interrupted, took, tree, markers = _stopped_midway(_command(klass, out), out, signal.SIGINT, rows_before=1)
    assert interrupted.returncode == 130 and "stopped by SIGINT after" in interrupted.stderr, interrupted.stderr
    assert not _left(tree, markers), "left running after Ctrl-C:\n" + "\n".join(_left(tree, markers))

    # killed outright (SIGKILL, the OOM killer, Kubernetes past its grace period): the fork servers die with it
    _, _, tree, markers = _stopped_midway(_command(klass, out), out, signal.SIGKILL, rows_before=1)
    assert not _left(tree, markers), "left running after SIGKILL:\n" + "\n".join(_left(tree, markers))

    rerun = _graded(_command(klass, out))
    assert rerun.returncode == 0, rerun.stderr
    manifest = json.loads(out.with_name("grades-manifest.json").read_text())
    assert manifest["finished"] and manifest["resumed"] >= 1
    assert out.read_bytes() == whole.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_a_batch_stopped_after_a_wave_keeps_its_students_and_the_same_command_grades_only_the_others(tmp_path, quick):
    """Issue 41 §4: the class is graded in waves of WAVE x -j students (Batch.launch), each wave piece by piece and
    its rows written by its end; a stop while a later wave's judges grade keeps every student of the waves before,
    quick or full."""
    names = []  # five students, three waves of -j 1: solved ones, and two still the stubs (no training case runs)
    for who, lab in (("ada", REFERENCE), ("bob", EXERCISES), ("cy", REFERENCE), ("dee", EXERCISES), ("eve", REFERENCE)):
        names.append(f"attention-lab-{who}")
        shutil.copytree(lab, tmp_path / "class" / names[-1] / "exercises")
        (tmp_path / "class" / names[-1] / ".git").mkdir()
    whole = tmp_path / "whole" / "grades.csv"
    done = _graded(_command(tmp_path / "class", whole, quick, jobs=1))
    assert done.returncode == 0, done.stderr

    out = tmp_path / "part" / "grades.csv"
    command = _command(tmp_path / "class", out, quick, jobs=1)
    stopped, _, _, _ = _stopped_midway(command, out, signal.SIGTERM, rows_before=WAVE)  # a wave's rows, a judge on
    assert stopped.returncode == 143, stopped.stderr
    kept = [line.split(",")[0] for line in out.read_text().splitlines()[1:]]
    assert names[:WAVE] == kept[:WAVE] and len(kept) < len(names), kept
    assert f"stopped by SIGTERM after {len(kept)} of {len(names)} students" in stopped.stderr, stopped.stderr
    reports = out.with_name("grades-reports")
    written = {name: (reports / f"{name}.json").stat().st_mtime_ns for name in kept}

    rerun = _graded(command)
    assert rerun.returncode == 0, rerun.stderr
    manifest = json.loads(out.with_name("grades-manifest.json").read_text())
    assert manifest["finished"] and manifest["resumed"] == len(kept), (manifest["resumed"], kept)
    # the kept students' reports as the stopped run wrote them (grading a student writes theirs again)
    assert {name: (reports / f"{name}.json").stat().st_mtime_ns for name in kept} == written
    assert out.read_bytes() == whole.read_bytes()
