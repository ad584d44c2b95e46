"""Where users are: a machine without fork (the Windows stand-in), an older Python's process start, a venv over
a private interpreter, and a grader that cannot start its own processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import ROOT
from grader.core import host
from grader.verbs.grade import main as check_main
from grader.runner.report import GRADER_ERROR
from grader.worker import jail

from helpers import QUICK, QUICK_TOTAL, REFERENCE, grade_dict, venv_over_this_environment

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

STANDIN = Path(__file__).parent / "standins" / "attnlab_nofork.py"


@pytest.fixture(scope="module")
def nofork_python(tmp_path_factory) -> Path:
    """A venv over this interpreter whose every process (the grader's children too) starts without what Windows
    lacks by the standard library's stubs, of what the grader uses (os.fork, os.O_NOFOLLOW, resource, descriptor
    passing, POSIX-only signals: stubs_account.py), and without Popen's POSIX-only arguments."""
    py = venv_over_this_environment(tmp_path_factory.mktemp("nofork") / "venv", process_pth=True)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / STANDIN.name).write_text(STANDIN.read_text())
    (site / "attnlab_nofork.pth").write_text("import attnlab_nofork\n")
    return py


def run_grade(py: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), "-m", "grader", *args], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=None if env is None else {**os.environ, **env})


def test_the_stand_in_takes_away_what_windows_lacks(nofork_python):
    probe = ("import os, socket, signal, subprocess, grader.core.host as h\n"
             "gone = [not hasattr(os, 'fork'), not hasattr(os, 'O_NOFOLLOW'), not hasattr(os, 'getpgid'),"
             " not hasattr(socket, 'send_fds'), not hasattr(signal, 'SIGALRM'), not hasattr(signal, 'SIGKILL'),"
             " h.resource is None, not h.FORK_SERVERS, hasattr(os, 'O_RDONLY'), hasattr(signal, 'SIGTERM')]\n"
             "try:\n    import resource\n    gone.append(False)\nexcept ImportError:\n    gone.append(True)\n"
             "try:\n    subprocess.Popen(['true'], preexec_fn=print)\n    gone.append(False)\n"
             "except ValueError:\n    gone.append(True)\n"
             "print(gone)")
    done = subprocess.run([str(nofork_python), "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str([True] * 12), done.stdout + done.stderr


def _cases(report: dict) -> dict[str, bool]:
    return {f"{p['name']}/{c['name']}": c["passed"] for p in report["pieces"] for c in p["cases"]}


def test_without_fork_the_reference_and_a_bug_score_as_they_do_with_it(nofork_python, lab, tmp_path):
    buggy = lab(edits={"additive": [('masked_fill(~src_mask, float("-inf"))', 'masked_fill(src_mask, float("-inf"))')]})
    pieces = ["encoder", "additive", "context"]
    for sub, code in ((REFERENCE, 0), (buggy, 1)):
        done = run_grade(nofork_python, *pieces, "--submission", str(sub), "--quick", "--format", "json")
        assert done.returncode == code, done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert _cases(report) == _cases(grade_dict(sub, pieces))  # the same cases pass as on the fork path
        missing = {g for p in report["pieces"] for g in p.get("jail_missing", [])}
        assert "resource limits" in missing  # each absent layer is named


def test_without_fork_the_stubs_score_zero_with_one_line_per_piece(nofork_python):
    done = run_grade(nofork_python, "encoder", "luong", "--submission", str(ROOT / "exercises"), "--quick")
    assert done.returncode == 1, done.stderr[-2000:]
    rows = {ln.split()[1]: ln.split()[2] for ln in done.stdout.splitlines() if ln.startswith(("✗", "✓"))}
    assert rows == {"encoder": "0/12", "luong": "0/8"}
    assert done.stdout.count("not implemented yet") >= 2
    notes = [ln for ln in done.stdout.splitlines() if ln.startswith("(isolation:")]
    assert len(notes) == 1 and "your score is the same" in notes[0]  # one short line; the JSON report says the rest


def test_without_fork_a_whole_quick_grade_gives_the_reference_full_marks_and_the_stubs_zero_without_a_traceback(
        nofork_python):
    for sub, want, code in ((REFERENCE, QUICK_TOTAL, 0), (ROOT / "exercises", 0, 1)):
        done = run_grade(nofork_python, "--submission", str(sub), "--quick", "--format", "json")
        assert done.returncode == code and "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert (sum(p["score"] for p in report["pieces"]), sum(p["max_score"] for p in report["pieces"])) == (
            want, QUICK_TOTAL), [(p["name"], p["score"]) for p in report["pieces"]]


@pytest.mark.parametrize("fmt", ["text", "json", "gradescope", "junit", "classroom"])
def test_a_grader_that_cannot_start_its_judge_says_why_exits_2_and_posts_no_score(fmt, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(host, "python", lambda module, *args: [sys.executable, "-X", "no-such-option-attnlab",
                                                               "--bogus-flag", "-m", module, *args])
    out = tmp_path / "report.out"
    code = check_main(submission=REFERENCE, pieces=["context"], fmt=fmt, seed="0", limits=QUICK, out=out, echo=print)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"Error: {GRADER_ERROR}") and "not the submission's fault" in err
    if fmt == "classroom":
        assert not out.exists()  # nothing for the reporter to post
        return
    text = out.read_text()
    assert "not the submission's fault" in text
    if fmt == "gradescope":
        data = json.loads(text)
        assert "score" not in data and "tests" not in data and "not the submission's fault" in data["output"]
    if fmt == "json":
        assert "score" not in json.loads(text)


def test_the_child_argv_keeps_the_working_directory_and_the_callers_python_variables_off_sys_path(tmp_path, monkeypatch):
    from grader.core.childenv import child_env

    (tmp_path / "json.py").write_text("raise SystemExit('shadowed json imported')\n")
    beside = tmp_path / "beside"
    beside.mkdir()
    (beside / "sitecustomize.py").write_text("raise SystemExit('sitecustomize imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(beside))
    monkeypatch.setenv("PYTHONSTARTUP", str(beside / "sitecustomize.py"))
    scrubbed = child_env()  # what a judge starts with
    assert not [k for k in scrubbed if k.startswith("PYTHON") and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED")]
    done = subprocess.run(host.python("json.tool", "--help"), cwd=tmp_path, capture_output=True, text=True, env=scrubbed)
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr
    (tmp_path / "runpy.py").write_text("raise SystemExit('runpy imported from the working directory')\n")
    frozen_off = host.python("json.tool", "--help")  # as on 3.10, where runpy is a plain file, not a frozen module
    done = subprocess.run([frozen_off[0], "-X", "frozen_modules=off", *frozen_off[1:]], cwd=tmp_path,
                          capture_output=True, text=True, env=scrubbed)
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr
    done = subprocess.run(host.python("site"), cwd=tmp_path, capture_output=True, text=True, env=scrubbed)
    assert done.returncode == 0, done.stderr
    entries = [line.strip().rstrip(",").strip("'") for line in done.stdout.split("sys.path = [")[1].split("]")[0].splitlines()]
    entries = [e for e in entries if e and "__path_hook__" not in e]  # setuptools' editable finder, shown joined to cwd
    assert entries[0] == host.import_root() and os.listdir(entries[0]) == ["grader"]
    assert str(tmp_path) not in entries and "" not in entries and str(beside) not in entries, entries


@pytest.fixture
def open_folder():
    """A folder every user can enter (pytest's own tmp_path sits under a private one)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="attnlab-perm-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_venv_over_a_private_interpreter_keeps_the_worker_from_dropping_to_nobody(open_folder, monkeypatch):
    tmp_path = open_folder
    public = tmp_path / "public"
    private = tmp_path / "home" / "private"
    public.mkdir()
    private.mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(public, 0o755)
    os.chmod(tmp_path / "home", 0o700)  # a home folder others cannot enter
    monkeypatch.setattr(sys, "path", [str(public)])
    for name in ("prefix", "exec_prefix", "base_prefix", "base_exec_prefix"):
        monkeypatch.setattr(sys, name, str(public))
    monkeypatch.setattr(sys, "executable", str(public / "python"))
    if not jail._world_readable(str(tmp_path)) or not all(jail._world_readable(str(p)) for p in Path(tmp_path).parents):
        pytest.skip("the test folder's parents are not world-readable here")
    assert jail.nobody_can_read_interpreter()
    monkeypatch.setattr(sys, "base_prefix", str(private))  # the venv is readable, the interpreter under it is not
    assert not jail.nobody_can_read_interpreter()
    monkeypatch.setattr(sys, "base_prefix", str(public))
    monkeypatch.setattr(sys, "path", [str(public), str(private)])  # nor is every sys.path entry
    assert not jail.nobody_can_read_interpreter()


def test_the_gpu_checks_device_bug_fails_the_device_case_that_runs_everywhere(lab):
    import importlib.util

    spec = importlib.util.spec_from_file_location("attnlab_bench_gpu", ROOT / "bench" / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    bug = lab(edits={"additive": [gpu.DEVICE_BUG]})
    report = grade_dict(bug, ["additive"])
    case = next(c for c in report["pieces"][0]["cases"] if c["name"] == "test_tensors_follow_the_input_device")
    assert not case["passed"] and "device" in case["message"]


def test_without_fork_check_from_a_notebook_and_the_plots_work(nofork_python, tmp_path):
    from grader.lesson import notebook

    nb = notebook.write(tmp_path / "lesson.ipynb", source="reference")
    code = f"from grader.lesson.notebook import check; print(repr(check('context', notebook={str(nb)!r})))"
    done = subprocess.run([str(nofork_python), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Runs(context 9/9)" in done.stdout, done.stderr[-2000:]
    done = run_grade(nofork_python, "context", "--quick", "--submission", str(REFERENCE), "--plots",
                     str(tmp_path / "plots"), env={"ATTNLAB_PLOT_STEPS": "30"})
    assert done.returncode == 0 and "plots written:" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
