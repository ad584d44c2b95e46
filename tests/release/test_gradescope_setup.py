"""Gradescope's setup.sh on an image whose system pip refuses to install (Debian 12, Ubuntu 24.04: PEP 668's
externally-managed-environment), with stand-ins for python3 and apt-get that record what they are asked."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader import ROOT

pytestmark = pytest.mark.skipif(os.name != "posix", reason="Gradescope's images are Linux")
TEMPLATES = ROOT / "grader" / "templates" / "gradescope"

# python3 as Debian 12 has it: `-m pip install` refuses, `-m venv` makes an environment (without python3-venv
# installed, it fails once, as Debian's does, until apt-get installs it)
SYSTEM_PYTHON = """#!/usr/bin/env bash
echo "python3 $*" >> "$LOG"
if [ "$1 $2" = "-m pip" ]; then
  echo "error: externally-managed-environment" >&2
  exit 1
fi
if [ "$1 $2" = "-m venv" ]; then
  if [ -n "${NO_VENV:-}" ] && [ ! -e "$STATE/python3-venv" ]; then
    mkdir -p "$3"; echo "The virtual environment was not created successfully because ensurepip is not available" >&2
    exit 1
  fi
  mkdir -p "$3/bin"
  printf '#!/usr/bin/env bash\\necho "venv-python $*" >> "$LOG"\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
  exit 0
fi
exit 3
"""
APT = """#!/usr/bin/env bash
echo "apt-get $*" >> "$LOG"
if [ "$1" = "install" ]; then touch "$STATE/python3-venv"; fi
"""


def setup(tmp_path: Path, **extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    root, bin_, state = tmp_path / "autograder", tmp_path / "bin", tmp_path / "state"
    for folder in (root / "source", bin_, state):
        folder.mkdir(parents=True)
    shutil.copyfile(TEMPLATES / "setup.sh", root / "source" / "setup.sh")
    for name, text in (("python3", SYSTEM_PYTHON), ("apt-get", APT)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "LOG": str(log), "STATE": str(state), "AUTOGRADER_ROOT": str(root), **extra}
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                          timeout=60)
    return done, log.read_text().splitlines() if log.exists() else []


def test_setup_installs_into_an_environment_of_its_own_where_the_system_pip_refuses(tmp_path):
    done, calls = setup(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(c.startswith("python3 -m pip") for c in calls), calls
    assert calls[0] == f"python3 -m venv {tmp_path / 'autograder' / 'venv'}"
    assert calls[1:] == ["venv-python -m pip install --no-cache-dir torch==2.13.0 --index-url "
                         "https://download.pytorch.org/whl/cpu", "venv-python -m pip install --no-cache-dir -e ."]


def test_setup_installs_python3_venv_where_the_image_lacks_it_then_makes_the_environment(tmp_path):
    done, calls = setup(tmp_path, NO_VENV="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "apt-get install -y python3-venv" in calls and calls[-1].startswith("venv-python -m pip install")


def test_run_autograder_grades_with_the_environment_setup_made(tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "bin" / "python").write_text('#!/usr/bin/env bash\necho "venv-python $*"\n')
    (root / "venv" / "bin" / "python").chmod(0o755)
    shutil.copyfile(TEMPLATES / "run_autograder", root / "source" / "run_autograder")
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "AUTOGRADER_ROOT": str(root)}, timeout=60)
    assert done.stdout.strip() == f"venv-python -m grader.verbs.gradescope {root}", done.stderr
