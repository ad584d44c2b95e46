"""Classroom 50 on a self-hosted runner grades with the machine's own `python3` (it skips setup-python there): the
generated autograder grades in full on a Python whose tarfile has no `filter=` — Debian 12's own 3.11.2 where the
machine has it, and everywhere a copy of this machine's 3.11 whose tarfile had the argument taken out — and the
bundle it unseals still refuses every unsafe member."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader import ROOT

from helpers import TOTAL
from release.classroom50_runner import SOLVED, autograde, checkout, kept_venv, make_lab

pytestmark = [pytest.mark.slow,  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it
              pytest.mark.skipif(os.name != "posix", reason="Classroom 50 grades on Linux runners")]

# Appended to the copy's tarfile.py: the module as a patch release before the extraction filters has it.
NO_FILTER = '''
# attention lab test stand-in: tarfile without extraction filters, as Python 3.11.2 ships it
TarFile.extraction_filter = staticmethod(fully_trusted_filter)
_lab_all, _lab_one = TarFile.extractall, TarFile.extract
def _lab_extractall(self, path=".", members=None, *, numeric_owner=False):
    return _lab_all(self, path, members, numeric_owner=numeric_owner)
def _lab_extract(self, member, path="", set_attrs=True, *, numeric_owner=False):
    return _lab_one(self, member, path, set_attrs, numeric_owner=numeric_owner)
TarFile.extractall, TarFile.extract = _lab_extractall, _lab_extract
del fully_trusted_filter, tar_filter, data_filter
__all__ = [name for name in __all__ if name in globals()]
'''
# Run in the venv the autograder made, from the bundle's own grader: unsafe members are still refused there.
REFUSES = '''
import io, sys, tarfile
sys.path.insert(0, sys.argv[1])
from grader.runner import sealing
assert not hasattr(tarfile, "data_filter"), "this tarfile has extraction filters"
refused = 0
for name, kind, link in (("../out.py", tarfile.REGTYPE, ""), ("/abs.py", tarfile.REGTYPE, ""),
                         ("link", tarfile.SYMTYPE, "/etc/passwd"), ("hard", tarfile.LNKTYPE, "x"),
                         ("dev", tarfile.CHRTYPE, ""), ("fifo", tarfile.FIFOTYPE, "")):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        tar.addfile(info, io.BytesIO(b"") if info.isfile() else None)
    try:
        sealing.extract(buf.getvalue(), sys.argv[2])
    except sealing.SealError:
        refused += 1
print("refused", refused)
'''


def debian_python() -> str | None:
    """The machine's own /usr/bin/python3 where its tarfile has no extraction filters (Debian 12's 3.11.2)."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        return None
    probe = subprocess.run([python, "-I", "-c", "import tarfile, venv, ensurepip; print(hasattr(tarfile, 'data_filter'))"],
                           capture_output=True, text=True)
    return python if probe.stdout.strip() == "False" else None


def stand_in_python(base: Path) -> str:
    """A clean copy of this machine's 3.11 (.ci/bare-python) whose tarfile lost `filter=`."""
    python = subprocess.run(["bash", str(ROOT / ".ci" / "bare-python"), "3.11"], capture_output=True, text=True,
                            env={**os.environ, "TMPDIR": str(base)}, check=True).stdout.strip().splitlines()[-1]
    stdlib = subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    tarfile_py = Path(stdlib, "tarfile.py")
    os.chmod(tarfile_py, 0o644)
    tarfile_py.write_text(tarfile_py.read_text(encoding="utf-8") + NO_FILTER, encoding="utf-8")
    shutil.rmtree(Path(stdlib, "__pycache__"), ignore_errors=True)
    return python


@pytest.mark.parametrize("kind", ["debian-3.11.2", "stand-in"])
def test_a_python_without_tarfile_filters_grades_the_reference_in_full(kind, tmp_path):
    if kind == "stand-in":
        python = stand_in_python(tmp_path)
    else:
        python = debian_python()
        if python is None:
            pytest.skip("this machine's /usr/bin/python3 has tarfile's filters (or no venv): the stand-in stands for it")
    lab = make_lab(tmp_path, python)
    done, doc = autograde(lab, checkout(lab, "solved", SOLVED))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (doc["score"], doc["max-score"]) == (TOTAL, TOTAL) and all(t["passed"] for t in doc["tests"])
    venv_python = kept_venv(lab) / "bin" / "python"
    (tmp_path / "into").mkdir()
    refused = subprocess.run([str(venv_python), "-I", "-c", REFUSES, str(lab["bundle"] / "lab"), str(tmp_path / "into")],
                             capture_output=True, text=True, cwd=tmp_path)
    assert refused.stdout.strip() == "refused 6", refused.stdout + refused.stderr
    assert not (tmp_path / "out.py").exists() and list((tmp_path / "into").iterdir()) == []
