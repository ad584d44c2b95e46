"""The Slurm engine on a real single-node Slurm (slurmctld, slurmd, munged, started by `.ci/slurm up`), not the
stand-in sbatch of test_engines: `grade release regrade OUT` writes the scripts, OUT/slurm/submit.sh clones the
roster's class and submits the array and its merge, exactly as an instructor runs them on a cluster.

CI starts the cluster (.ci/run exports SLURM_CONF and ATTNLAB_REAL_SLURM=1); there a cluster that does not answer
fails this test. Elsewhere it runs where SLURM_CONF names a cluster that answers, and is skipped otherwise.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from grader import ROOT

from .github import BIN, FAKES
from .test_engines import (
    DEADLINE,
    ORG,
    PREFIX,
    ROSTER,
    SECRETS,
    check_class_gradebook,
    klass,  # noqa: F401 - the roster's class, a fixture
    shards_of,
)

pytestmark = pytest.mark.slow
WAIT = 900  # seconds for a job to end: a quick grade of a shard takes under a minute on two cores


def cluster_answers() -> str:
    """'' where a Slurm cluster takes jobs, else why not."""
    if not os.environ.get("SLURM_CONF") or shutil.which("sinfo") is None:
        return "no Slurm cluster here (CI starts one with .ci/slurm up; see .ci/run)"
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], check=False, capture_output=True, text=True, timeout=30)
    if done.returncode != 0 or not re.search(r"^(idle|mixed|allocated)", done.stdout, re.MULTILINE):
        return f"the Slurm cluster at {os.environ['SLURM_CONF']} takes no jobs: {(done.stdout + done.stderr).strip()}"
    return ""


@pytest.fixture(scope="module")
def cluster() -> None:
    why = cluster_answers()
    if why and os.environ.get("ATTNLAB_REAL_SLURM") == "1":
        pytest.fail(why)  # CI said it started one: a cluster that does not answer is a failure, not a skip
    if why:
        pytest.skip(why)


def jobs(job: str) -> dict[str, dict[str, str]]:
    """Each task of `job` (an array's "ID_K", a plain job's "ID") with its JobState and ExitCode, once none is
    pending or running; scontrol keeps ended jobs for MinJobAge (.ci/slurm sets 600 s)."""
    end = time.monotonic() + WAIT
    while True:
        done = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, check=True)
        tasks = {}
        for line in done.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            task = fields.get("ArrayTaskId")
            tasks[f"{fields['JobId'] if task is None else fields['ArrayJobId'] + '_' + task}"] = fields
        if all(t["JobState"] not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for t in tasks.values()):
            return tasks
        assert time.monotonic() < end, f"job {job} still running after {WAIT} s: {done.stdout}"
        time.sleep(1)


def processes(tmpdir: Path) -> dict[str, list[bytes]]:
    """The processes whose environment holds TMPDIR=tmpdir (pid: environment): every process a batch starts keeps
    TMPDIR, its jailed workers too, whose environment is otherwise built from nothing."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if f"TMPDIR={tmpdir}".encode() in env:
            found[proc.name] = env
    return found


def grading(tmpdir: Path, task: int) -> None:
    """Wait until array task `task` of the run with TMPDIR=tmpdir grades: it runs, and a worker is up (a process
    holding TMPDIR but none of the job's variables: a worker's environment is built from nothing). Each task takes
    both CPUs of the node, so the worker up is that task's."""
    end = time.monotonic() + WAIT
    while True:
        envs = processes(tmpdir).values()
        if any(f"SLURM_ARRAY_TASK_ID={task}".encode() in env for env in envs) and \
                any(not any(v.startswith(b"SLURM_") for v in env) for env in envs):
            return
        assert time.monotonic() < end, f"task {task} of the run with TMPDIR={tmpdir} not grading after {WAIT} s"
        time.sleep(0.2)


def left_behind(tmpdir: Path, within: float = 60) -> list[str]:
    """The processes of the run with TMPDIR=tmpdir still alive `within` seconds on."""
    end = time.monotonic() + within
    while (found := processes(tmpdir)) and time.monotonic() < end:
        time.sleep(1)
    return [f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:120]!r}" for pid in found]


def parsable(command: str) -> str:
    """A printed sbatch command that prints only the job's id, as submit.sh's own calls do."""
    assert command.count(" sbatch ") == 1, command
    return command.replace(" sbatch ", " sbatch --parsable ")


def logs(where: Path) -> str:
    return "".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(where.glob("attnlab-*.out")))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_real_slurm_grades_the_class_as_the_unsharded_batch_and_a_killed_task_is_rerun_as_printed(
        tmp_path, klass, cluster):  # noqa: F811 - klass is test_engines' class, imported as a fixture
    subprocess.run([str(BIN / "grade"), "release", "regrade", str(tmp_path / "engines")], check=True,
                   capture_output=True)
    submit = tmp_path / "engines" / "slurm" / "submit.sh"
    tools = tmp_path / "tools"  # the stand-in gh serves the class; sbatch, squeue and the rest are Slurm's own
    tools.mkdir()
    (tools / "gh").symlink_to(FAKES / "gh")
    shutil.copyfile(ROSTER, tmp_path / "roster.csv")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.pathsep.join([str(tools), str(BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
           "HOME": str(home), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "SLURM_CONF": os.environ["SLURM_CONF"],
           **klass.fake(), "LAB": str(ROOT), "PARTS": str(tmp_path / "parts"), "OUT": str(tmp_path / "out"),
           "DEADLINE": DEADLINE, "GRADE_OPTS": "--quick", "ATTNLAB_SEED": SECRETS["ATTNLAB_SEED"], "ORG": ORG,
           "PREFIX": PREFIX, "ROSTER": "roster.csv"}
    class_dir = tmp_path / "class"
    # the shard with more students is the one killed, so that it is still grading when the kill lands
    victim = max(shards_of(klass, 2).items(), key=lambda kv: len(kv[1]))[0]

    done = subprocess.run([str(submit), str(class_dir), "2"], check=False, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    array = re.search(r"^shards: job (\d+) \(array 1-2\)", done.stdout, re.MULTILINE).group(1)
    merge = re.search(r"^merge:  job (\d+),", done.stdout, re.MULTILINE).group(1)
    tasks, merged = jobs(array), jobs(merge)
    assert {t: f["JobState"] for t, f in tasks.items()} == {f"{array}_1": "COMPLETED", f"{array}_2": "COMPLETED"}, \
        logs(tmp_path)
    assert merged[merge]["JobState"] == "COMPLETED", logs(tmp_path)
    book = tmp_path / "out" / "grades.csv"
    check_class_gradebook(book, klass)
    sharded = book.read_bytes()

    # the same class graded whole, on this machine: the cluster's gradebook is byte for byte this one
    whole = tmp_path / "whole" / "grades.csv"
    subprocess.run([str(BIN / "grade"), "batch", str(class_dir), "--out", str(whole), "--roster",
                    str(tmp_path / "roster.csv"), "--prefix", PREFIX, "--before", DEADLINE, "--quick"],
                   env={**env, "SLURM_CONF": ""}, check=True, capture_output=True, timeout=600)
    assert sharded == whole.read_bytes()

    # a second run; its task `victim` is cancelled while it grades, as a time limit or a preemption stops it (SIGTERM)
    shutil.rmtree(tmp_path / "parts"), shutil.rmtree(tmp_path / "out")
    run_tmp = tmp_path / "tmp"
    run_tmp.mkdir()
    done = subprocess.run([str(submit), str(class_dir), "2"], check=False, cwd=tmp_path,
                          env={**env, "ORG": "", "TMPDIR": str(run_tmp)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    array = re.search(r"^shards: job (\d+) \(array 1-2\)", done.stdout, re.MULTILINE).group(1)
    merge = re.search(r"^merge:  job (\d+),", done.stdout, re.MULTILINE).group(1)
    grading(run_tmp, victim)
    subprocess.run(["scancel", f"{array}_{victim}"], check=True)
    tasks, merged = jobs(array), jobs(merge)
    assert tasks[f"{array}_{victim}"]["JobState"] == "CANCELLED", logs(tmp_path)
    assert tasks[f"{array}_{3 - victim}"]["JobState"] == "COMPLETED", logs(tmp_path)
    stray = left_behind(run_tmp)
    assert not stray, "the cancelled task left processes running:\n" + "\n".join(stray)
    said = (tmp_path / f"attnlab-regrade-{array}_{victim}.out").read_text()
    assert re.search(r"stopped by SIGTERM after \d+ of \d+ students; rerun the same command to resume", said), said
    # the merge ran after every task (afterany), and refused, naming the cancelled shard's students
    assert merged[merge]["JobState"] == "FAILED", logs(tmp_path)
    said = (tmp_path / f"attnlab-merge-{merge}.out").read_text()
    assert all(s in said for s in shards_of(klass, 2)[victim]) or "did not finish" in said, said
    assert not (tmp_path / "out" / "grades.csv").exists()

    # the rerun and the merge, as submit.sh printed them, from a fresh shell holding nothing but the seed
    lines = done.stdout.splitlines()
    rerun_cmd = lines[lines.index(next(ln for ln in lines if ln.startswith("rerun a failed shard K"))) + 1].strip()
    merge_cmd = lines[lines.index("then merge again:") + 1].strip()
    fresh = {"PATH": env["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "SLURM_CONF": os.environ["SLURM_CONF"],
             "ATTNLAB_SEED": SECRETS["ATTNLAB_SEED"]}
    out = subprocess.run(["bash", "-c", parsable(rerun_cmd.replace("--array=K ", f"--array={victim} "))],
                         cwd=tmp_path, env=fresh, check=True, capture_output=True, text=True).stdout
    rerun = out.strip().split(";")[0]
    assert {f["JobState"] for f in jobs(rerun).values()} == {"COMPLETED"}, logs(tmp_path)
    out = subprocess.run(["bash", "-c", parsable(merge_cmd)], cwd=tmp_path, env=fresh, check=True,
                         capture_output=True, text=True).stdout
    merge = out.strip().split(";")[0]
    assert jobs(merge)[merge]["JobState"] == "COMPLETED", logs(tmp_path)
    assert book.read_bytes() == sharded
