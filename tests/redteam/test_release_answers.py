"""Red team: a student release gives no piece's answer away in a file a student can read or call.

The lab's own code once shipped in clear (grader/lab/), and two of its files solved two pieces: the baseline's
`Encoder` is `EncoderAll`, and the evaluator's `greedy` and `batch_accuracy_by_length` are `greedy_decode` and
`accuracy_by_length`. Copied mechanically into encoder.py and evaluation.py they scored 20/20, as honest code does.
A release now seals those modules (grader.lab.SEALED) with the hidden cases; these tests grep every file it
ships for the answer code of the reference and of those modules, and show that the copy still scores from an
instructor's checkout but cannot be made from a release.
"""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from grader import ROOT, lab
from grader.release.build import student

from helpers import EXERCISES, REFERENCE, grade_dict, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

LAB = ROOT / "grader" / "lab"
# the mechanical copy's adapters: the lab's calls take a batch, the pieces' take its tensors
EVALUATION_ADAPTER = '''

from types import SimpleNamespace as _Batch


def greedy_decode(model, src, src_mask, sos, steps):
    tgt = torch.cat([sos, sos.new_zeros(sos.size(0), steps)], 1)
    return greedy(model, _Batch(src=src, src_mask=src_mask, tgt=tgt))


def accuracy_by_length(model, src, src_mask, tgt):
    return batch_accuracy_by_length(model, _Batch(src=src, src_mask=src_mask, tgt=tgt))
'''


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    rel, _ = student(tmp_path_factory.mktemp("answers") / "lab")
    return rel


def mechanical_copy(lab_dir: Path, into: Path) -> list[str]:
    """The stubs, with encoder.py and evaluation.py made from `lab_dir`'s baseline.py and evaluate.py where they are
    there to copy; returns the files it could make."""
    into.mkdir(parents=True)
    for path in EXERCISES.glob("*.py"):
        shutil.copyfile(path, into / path.name)
    made = []
    if (lab_dir / "baseline.py").is_file():
        (into / "encoder.py").write_text((lab_dir / "baseline.py").read_text() + "\n\nclass EncoderAll(Encoder):\n    pass\n")
        made.append("encoder.py")
    if (lab_dir / "evaluate.py").is_file():
        text = (lab_dir / "evaluate.py").read_text().replace("from . import toy\n", "")  # only a type annotation
        (into / "evaluation.py").write_text(text + EVALUATION_ADAPTER)
        made.append("evaluation.py")
    return made


def solution_lines(text: str) -> list[str]:
    inside, found = False, []
    for line in text.splitlines():
        if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
            inside = "BEGIN" in line
        elif inside:
            found.append(line.strip())
    return found


def answer_lines() -> set[str]:
    """Distinctive lines (>= 20 characters, not a comment, not in any stub) of the reference's solution blocks and of
    the lab modules that answer a piece."""
    public = {ln.strip() for p in EXERCISES.glob("*.py") for ln in p.read_text().splitlines()}
    lines = {ln for p in REFERENCE.glob("*.py") for ln in solution_lines(p.read_text())}
    lines |= {ln.strip() for name in lab.SEALED for ln in (LAB / f"{name}.py").read_text().splitlines()}
    return {ln for ln in lines if len(ln) >= 20 and ln not in public and not ln.startswith(("#", '"""'))}


def shipped_text(path: Path) -> str:
    """A shipped file as a reader sees it: a notebook's cells joined (JSON escapes quotes), any other file's bytes."""
    data = path.read_bytes()
    if path.suffix == ".ipynb":
        cells = json.loads(data)["cells"]
        return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells)
    return data.decode("utf-8", errors="ignore")


def test_the_copy_is_a_real_attack_it_scores_in_an_instructors_checkout(tmp_path):
    made = mechanical_copy(LAB, tmp_path / "copy")
    assert made == ["encoder.py", "evaluation.py"]
    assert scores(grade_dict(tmp_path / "copy", ["encoder", "evaluation"])) == {"encoder": (12, 12), "evaluation": (8, 8)}


def test_the_copy_cannot_be_made_from_a_release(release, tmp_path):
    assert mechanical_copy(release / "grader" / "lab", tmp_path / "copy") == []
    assert not [name for name in lab.SEALED if (release / "grader" / "lab" / f"{name}.py").exists()]
    # nor from any other file a release ships: none defines what the copy (or its decoder half) calls
    wanted = {"Encoder", "greedy", "batch_accuracy_by_length", "token_counts", "decode_teacher_forced", "LuongDecoder"}
    for path in release.rglob("*.py"):
        if path.parent.name == "exercises":
            continue
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & wanted, f"{path.relative_to(release)} defines {sorted(defined & wanted)}"


def test_no_file_of_a_release_holds_the_reference_or_the_labs_answer_code(release):
    lines = answer_lines()
    assert len(lines) > 50  # the check has something to find: the solution blocks and the sealed lab modules
    files = [p for p in release.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in files}
    assert {".py", ".ipynb", ".json", ".md", ".yml", ".pt", ".bin"} <= kinds  # code, notebook, artifacts, templates
    found = {}
    for path in files:
        text = shipped_text(path)
        hits = sorted(ln for ln in lines if ln in text)
        if hits:
            found[str(path.relative_to(release))] = hits[:3]
    assert not found, found
