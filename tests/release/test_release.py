"""`grade release student`: nothing readable gives the answers away, and grading still works."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import ROOT

from helpers import QUICK_TOTAL

SOLUTION_ONLY = ["torch.bmm(alpha.unsqueeze(1)", "self.v(torch.tanh(", "torch.sigmoid(keys + query)", "scores / d**0.5", "_keys_of"]


def grade_in(rel: Path, *args: str, key: bytes | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    env["PYTHONPATH"] = str(rel)
    if key:
        env["ATTNLAB_SEAL_KEY"] = key.decode()
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=rel, env=env, capture_output=True, text=True,
                          timeout=300, input=stdin)


def test_the_release_holds_no_reference_and_no_case_source(release):
    rel, _ = release
    assert not (rel / "reference").exists() and not (rel / "tests").exists()
    assert not list((rel / "grader" / "cases").glob("test_*.py"))
    for path in rel.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".ipynb", ".md", ".yml", ".toml", ".json"):
            text = path.read_text(errors="replace")
            assert not any(s in text for s in SOLUTION_ONLY), f"{path.relative_to(rel)} gives a solution away"


def test_with_the_key_the_sealed_cases_grade_the_reference_in_full(release):
    rel, key = release
    done = grade_in(rel, "--quick", "--format", "json", "--submission", str(ROOT / "reference"), key=key)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"] == QUICK_TOTAL


def test_without_the_key_only_the_public_checks_run_and_say_so(release):
    rel, _ = release
    done = grade_in(rel, "--submission", str(ROOT / "reference"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Public smoke checks only" in done.stdout and "Total: 6/6" in done.stdout
    assert "✗" not in done.stdout and "point-free" not in done.stdout  # the pieces checked together too, all passed
    stubs = grade_in(rel, "--submission", "exercises")
    assert stubs.returncode == 1 and "Total: 0/6" in stubs.stdout


def test_a_wrong_key_is_one_clean_line_and_exit_2(release):
    rel, _ = release
    done = grade_in(rel, "--submission", "exercises", key=b"x" * 44)
    assert done.returncode == 2 and "does not open grader/sealed.bin" in done.stdout + done.stderr
    printed = (done.stdout + done.stderr).strip().splitlines()
    assert len(printed) == 1 and printed[0].startswith("Error: ") and "Usage" not in done.stderr, printed


def test_the_key_can_come_on_standard_input_as_the_workflow_passes_it(release):
    rel, key = release
    done = grade_in(rel, "context", "--quick", "--format", "json", "--seal-key-file", "-", "--submission",
                    str(ROOT / "reference"), stdin=key.decode())
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"] == 9  # the sealed cases, not the public check


@pytest.mark.parametrize("command", [["stubs"], ["release", "student", "out"], ["manifest"], ["artifacts"]])
def test_instructor_commands_in_a_student_checkout_say_so_in_one_line(release, command):
    rel, _ = release
    done = grade_in(rel, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is an instructor command" in done.stderr and "Traceback" not in done.stdout + done.stderr


def test_the_student_readme_says_which_file_is_graded_for_each_piece(release):
    rel, _ = release
    text = " ".join((rel / "README.md").read_text().split())
    assert "grades its `.py` file, unless that file is still the untouched stub: then it grades the piece's cell in " \
           "`exercises/lesson.ipynb`" in text


# --- the lab code that answers a piece is sealed, and the lab still runs with the key -----------------

def test_the_lab_modules_that_answer_a_piece_travel_sealed_not_in_clear(release, tmp_path):
    from grader import lab
    from grader.runner import sealing

    rel, key = release
    shipped = sorted(p.name for p in (rel / "grader" / "lab").glob("*.py"))
    assert shipped == ["__init__.py", "artifacts.py", "toy.py", "train.py"]
    sealing.unseal((rel / "grader" / "sealed.bin").read_bytes(), key, tmp_path)
    for name in lab.SEALED:
        assert (tmp_path / lab.SEALED_DIR / f"{name}.py").read_bytes() == (ROOT / "grader" / "lab" / f"{name}.py").read_bytes()


OPEN_THE_LAB = """
import sys
from grader import lab
from grader.runner import layout
layout.current()
print("missing", ",".join(lab.missing()) or "none")
if not lab.missing():
    from grader.lab import evaluate, luong_model
    from grader.judge.sources import lab_sources
    print("from", evaluate.__file__, luong_model.__file__)
    print("sources", [name for name, text in lab_sources(("toy", "train", "baseline", "luong_model")) if text])
"""


def test_with_the_key_the_sealed_lab_imports_from_the_bundle_and_without_it_nothing_holds_it(release):
    rel, key = release
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    env["PYTHONPATH"] = str(rel)
    done = subprocess.run([sys.executable, "-c", OPEN_THE_LAB], cwd=rel, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "missing baseline,evaluate,luong_model" in done.stdout, done.stdout + done.stderr
    env["ATTNLAB_SEAL_KEY"] = key.decode()
    done = subprocess.run([sys.executable, "-c", OPEN_THE_LAB], cwd=rel, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "missing none" in done.stdout, done.stdout + done.stderr
    files = done.stdout.split("from ", 1)[1].split("\n", 1)[0].split()
    assert all("attnlab-sealed-" in f and "/attnlab_lab/" in Path(f).as_posix() for f in files), files
    assert "sources ['toy', 'train', 'baseline', 'luong_model']" in done.stdout  # what Luong's training worker is sent


PLOTS = """
import sys
from pathlib import Path
from grader.plots import draw
try:
    draw.main(submission=Path(sys.argv[1]), out=Path(sys.argv[2]))
except draw.PlotError as e:
    print("PlotError:", e)
"""


def test_without_the_key_grade_plots_says_in_one_line_that_the_sealed_lab_is_needed(release, tmp_path):
    rel, _ = release
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    env["PYTHONPATH"] = str(rel)
    done = subprocess.run([sys.executable, "-c", PLOTS, str(ROOT / "reference"), str(tmp_path / "plots")], cwd=rel,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("PlotError: this release seals the lab's evaluator and Luong's model")
    assert "exercises/lesson.ipynb" in said[0] and not (tmp_path / "plots").exists()


# --- the seal key: for its owner only, and the same from one release to the next ----------------------

def release_cli(out: Path, *args: str, key: bytes | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    if key:
        env["ATTNLAB_SEAL_KEY"] = key.decode()
    return subprocess.run([sys.executable, "-m", "grader", "release", "student", str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def opens(out: Path, key: bytes, into: Path) -> bool:
    from grader.runner import sealing

    try:
        sealing.unseal((out / "grader" / "sealed.bin").read_bytes(), key, into)
    except sealing.SealError:
        return False
    return (into / "reference" / "encoder.py").is_file()


@pytest.mark.skipif(os.name != "posix", reason="POSIX mode bits")
def test_the_key_is_written_for_its_owner_only_and_reused_by_the_next_release(tmp_path):
    import shutil
    import stat

    out = tmp_path / "new" / "deeper" / "lab"  # two folders made for the key: both 0700
    first = release_cli(out)
    assert first.returncode == 0, first.stdout + first.stderr
    key_file = tmp_path / "new" / "deeper" / "lab.seal-key"
    assert f"sealing key: a new one, written to {key_file} (mode 0600)" in first.stdout
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    for folder in (tmp_path / "new", tmp_path / "new" / "deeper"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert not list(out.rglob("*.seal-key"))  # never inside the release
    secret = key_file.read_bytes().strip()  # what the instructor stored as the Classroom secret

    shutil.rmtree(out)  # the next release, built where the last one was
    again = release_cli(out)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"sealing key: reused from {key_file}, the previous release's key file" in again.stdout
    assert key_file.read_bytes().strip() == secret and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert opens(out, secret, tmp_path / "opened-again")  # the old Classroom secret opens the new release

    shutil.rmtree(out)
    rotated = release_cli(out, "--new-key")
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    assert "a new one" in rotated.stdout and "replaces the previous release's key" in rotated.stdout
    new = key_file.read_bytes().strip()
    assert new != secret and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert opens(out, new, tmp_path / "opened-new") and not opens(out, secret, tmp_path / "opened-old")


def test_the_key_can_come_from_a_file_or_the_environment_and_an_old_loose_key_file_is_tightened(tmp_path):
    import stat

    from cryptography.fernet import Fernet

    mine = tmp_path / "keys" / "attn.key"
    mine.parent.mkdir()
    mine.write_bytes(Fernet.generate_key() + b"\n")
    done = release_cli(tmp_path / "a", "--seal-key-file", str(mine))
    assert done.returncode == 0 and f"reused from {mine} (--seal-key-file); nothing written" in done.stdout, done.stdout
    assert not (tmp_path / "a.seal-key").exists() and opens(tmp_path / "a", mine.read_bytes().strip(), tmp_path / "o1")

    secret = Fernet.generate_key()
    done = release_cli(tmp_path / "b", key=secret)
    assert done.returncode == 0 and "reused from ATTNLAB_SEAL_KEY, written to" in done.stdout, done.stdout
    assert (tmp_path / "b.seal-key").read_bytes().strip() == secret and opens(tmp_path / "b", secret, tmp_path / "o2")
    other = release_cli(tmp_path / "b2", key=secret)  # not the key beside b2: fine, b2 has none yet
    assert other.returncode == 0, other.stdout + other.stderr
    clash = release_cli(tmp_path / "b", "--seal-key-file", str(mine), "--new-key")
    assert clash.returncode == 2 and "--new-key makes a new key" in clash.stderr and "Traceback" not in clash.stderr

    loose = tmp_path / "c.seal-key"  # an older `grade release student` wrote it -rw-r--r--
    loose.write_bytes(secret + b"\n")
    loose.chmod(0o644)
    done = release_cli(tmp_path / "c")
    assert done.returncode == 0 and "its mode is now 0600" in done.stdout, done.stdout
    if os.name == "posix":
        assert stat.S_IMODE(loose.stat().st_mode) == 0o600
    assert opens(tmp_path / "c", secret, tmp_path / "o3")
    wrong = release_cli(tmp_path / "d", key=b"not a key")
    assert wrong.returncode == 2 and "ATTNLAB_SEAL_KEY does not hold a seal key" in wrong.stderr


def test_lab_sources_read_a_sealed_module_from_the_attached_bundle_and_name_it_when_it_is_not(tmp_path, monkeypatch):
    from grader import lab
    from grader.judge.sources import lab_sources

    clear = tmp_path / "clear"  # a release's grader/lab: the sealed modules are not there
    clear.mkdir()
    (clear / "toy.py").write_text("TOY = 1\n")
    monkeypatch.setattr(lab, "__path__", [str(clear)])
    assert lab.missing() == list(lab.SEALED)
    with pytest.raises(FileNotFoundError, match=r"grader/lab/baseline.py is sealed in this release"):
        lab_sources(("toy", "baseline"))
    (tmp_path / "opened" / lab.SEALED_DIR).mkdir(parents=True)
    (tmp_path / "opened" / lab.SEALED_DIR / "baseline.py").write_text("SEALED = 1\n")
    assert lab.attach(tmp_path / "opened") and not lab.attach(tmp_path / "nothing-here")
    assert lab_sources(("toy", "baseline")) == [("toy", "TOY = 1\n"), ("baseline", "SEALED = 1\n")]
    assert lab.missing() == ["evaluate", "luong_model"]
