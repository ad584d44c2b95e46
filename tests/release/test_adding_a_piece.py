"""docs/adding-a-piece.md, followed word for word: in a copy of the repository, a seventh piece (multi-head dot
attention) is added with the four files the page names and `grade generate`, and every route grades it: the
instructor's `grade`, the notebook, a sealed student release, the per-push workflow, Classroom 50, Gradescope and
`grade batch`. Every command runs the copy's own grader in a child process, never this checkout's."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import ROOT

from classroom import report_file, run_grading_step, run_reporter_step

pytestmark = [pytest.mark.slow,  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it
              pytest.mark.skipif(os.name != "posix", reason=
                                 "the workflow's steps are bash")]
NAME = "multihead"

# --- the four hand-written files ---------------------------------------------------------------------------------

REFERENCE_FILE = '''"""Piece `multihead`: scaled dot-product attention in several heads, each over its own slice of the state."""
from __future__ import annotations

import torch
import torch.nn as nn

from .context import attention_context


class MultiHeadDotAttention(nn.Module):
    """`heads` scaled dot-product attentions over d/heads-wide slices of the states; no learned parameters."""

    def __init__(self, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads

    def forward(
        self,
        encoder_outputs: torch.Tensor,
        decoder_state: torch.Tensor,
        src_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from one decoder state, head by head.

        Args:
            encoder_outputs: (B, T_src, d) encoder states; head k reads columns k*d/heads to (k+1)*d/heads.
            decoder_state: (B, d) the query, sliced the same way.
            src_mask: (B, T_src) bool, True at real tokens and False at pads; None means no pads.

        Returns:
            context: (B, d), the heads' contexts side by side.
            alpha: (B, heads, T_src), each head's softmax of its scaled scores; exactly 0 at pads.
        """
        ### BEGIN SOLUTION
        B, T, d = encoder_outputs.shape
        k = d // self.heads
        keys = encoder_outputs.view(B, T, self.heads, k).transpose(1, 2)  # (B, heads, T_src, k)
        query = decoder_state.view(B, self.heads, k, 1)  # (B, heads, k, 1)
        scores = (keys @ query).squeeze(-1) / k**0.5  # (B, heads, T_src)
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
        alpha = torch.softmax(scores, dim=-1)  # (B, heads, T_src)
        context = attention_context(alpha.reshape(B * self.heads, T), keys.reshape(B * self.heads, T, k))
        return context.view(B, d), alpha  # (B * heads, k) -> (B, d): head by head
        ### END SOLUTION
'''

CASES_FILE = '''"""Hidden cases for the `multihead` piece: MultiHeadDotAttention.forward."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from . import util

pytestmark = pytest.mark.piece("multihead")
HEADS = 2  # the reference's default; MAIN's H = 6 splits into two 3-wide heads


def attend(sub, enc, q, mask):
    m = util.build(sub, "MultiHeadDotAttention")
    out = verdicts.pair(verdicts.call(m, enc, q, mask, what="MultiHeadDotAttention.forward"),
                        "forward's result (context, alpha)")
    B, T, H = enc.shape
    return verdicts.tensor(out[0], "context", (B, H)), verdicts.tensor(out[1], "alpha", (B, HEADS, T))


@pytest.mark.points(2)
def test_it_matches_the_reference_head_by_head(sub, ref):
    s = util.MAIN
    mask = util.mask_for(util.lengths(s), s.T)
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, mask)
    rc, ra = ref.multihead.MultiHeadDotAttention()(enc, q, mask)
    util.close(alpha, ra, "alpha", "Each head scores its own slice of the states by a dot product / sqrt(d / heads), "
               "softmax over the real positions.")
    util.close(context, rc, "context", "Each head's context is the alpha-weighted sum of its slice; the heads side by side.")


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    mask = util.mask_for(util.lengths(s), s.T)
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, mask)
    rc, ra = ref.multihead.MultiHeadDotAttention()(enc, q, mask)
    util.right_on_the_cpu({"alpha": (alpha, ra), "the context": (context, rc)}, "it matches the reference head by head")
    util.same_on_a_device(util.build(sub, "MultiHeadDotAttention"), enc, q, mask, what="MultiHeadDotAttention.forward",
                          outs=[util.Out("alpha", (1,), ra), util.Out("the context", (0,), rc)])


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    def alpha_on(dev):
        s = util.MAIN
        enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
        return attend(sub, enc.to(dev), q.to(dev), None)[1], ref.multihead.MultiHeadDotAttention()(enc, q)[1]
    util.cuda_matches_cpu(alpha_on, "alpha")
'''

LESSON_FILE = """## #. Several heads

One score per position asks one question of the source. Split each state into `heads` slices and
let each slice attend on its own, with the scaled dot product of the last section: each head gets its
own weights and its own context, and the contexts sit side by side in one vector of the same size $d$.
Write `MultiHeadDotAttention.forward`; `attention_context` does each head's sum.
"""

ENTRY = '        Piece("multihead", "MultiHeadDotAttention.forward: scaled dot attention in several heads"),\n'
STUB_LINE = "not implemented yet (piece 'multihead': write MultiHeadDotAttention.forward)"


@dataclass
class Copy:
    repo: Path  # the repository with the seventh piece
    base: Path  # scratch space beside it
    touched: set[str]  # the paths git sees changed or new after the four files and `grade generate`

    def grade(self, *args: str, cwd: Path | None = None, env: dict | None = None,
              timeout: float = 900) -> subprocess.CompletedProcess:
        """`grade args...` run by the grader of `cwd` (the copy by default), as `python -m grader` there."""
        return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd or self.repo, env=env or clean_env(),
                              capture_output=True, text=True, timeout=timeout)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ATTNLAB_", "GITHUB_")) and k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, "MPLBACKEND": "Agg", **extra}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=lab", "-c", "user.email=lab@example.com", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


def documented(section: str) -> set[str]:
    """The paths in the first column of the table under `## <section>` of docs/adding-a-piece.md, for this piece."""
    text = (ROOT / "docs" / "adding-a-piece.md").read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return {m.replace("<name>", NAME) for m in re.findall(r"^\| `([^`]+)` \|", body, flags=re.M)}


def manifest_total(repo: Path) -> tuple[int, int]:
    """(all points, the new piece's points) as the copy's hidden-case manifest sums them."""
    data = json.loads((repo / "grader" / "cases" / "manifest.json").read_text())
    return sum(c["points"] for cases in data.values() for c in cases), sum(c["points"] for c in data[NAME])


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Copy:
    base = tmp_path_factory.mktemp("seventh")
    repo = base / "repo"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the lab as it is")
    # the four files, as docs/adding-a-piece.md says
    (repo / "reference" / f"{NAME}.py").write_text(REFERENCE_FILE)
    (repo / "grader" / "cases" / f"test_{NAME}.py").write_text(CASES_FILE)
    (repo / "grader" / "templates" / "lesson" / f"{NAME}.md").write_text(LESSON_FILE)
    registry = repo / "grader" / "core" / "pieces.py"
    text = registry.read_text()
    anchor = '        Piece("decoder",'  # after luong, before the decoder
    assert text.count(anchor) == 1
    registry.write_text(text.replace(anchor, ENTRY + anchor))
    got = Copy(repo, base, set())
    done = got.grade("generate")
    assert done.returncode == 0, done.stdout + done.stderr
    assert str(repo) in done.stdout, "`grade generate` ran another checkout's grader"
    # the README, as the page's "Then the README" says: the count in words, the table's row, the printed total
    total = int(re.findall(r"(\d+) points", done.stdout)[-1])
    before = sum(c["points"] for cases in json.loads((ROOT / "grader" / "cases" / "manifest.json").read_text()).values()
                 for c in cases)
    readme = repo / "README.md"
    text = readme.read_text(encoding="utf-8").replace("You write six pieces", "You write seven pieces")
    luong_row = next(line for line in text.splitlines() if line.startswith("| `luong` |"))
    text = text.replace(luong_row, luong_row + f"\n| `{NAME}` | `{NAME}.py` | `MultiHeadDotAttention.forward` |")
    for phrase in ("the full grade, {} points", "(0/{}", "Attention lab: X/{} points", "set the total points to {}."):
        text = text.replace(phrase.format(before), phrase.format(total))
    readme.write_text(text, encoding="utf-8")
    got.touched = {line[3:] for line in git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()}
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a seventh piece")
    return got


def test_the_page_lists_exactly_the_files_a_seventh_piece_touches(copy):
    written, generated = documented("You write four files"), documented("Then run one command")
    prose = documented("Then the README")
    assert len(written) == 4 and prose == {"README.md"}
    assert copy.touched == written | generated | prose, (
        f"docs/adding-a-piece.md lists {sorted(written | generated | prose)}; the seventh piece touched "
        f"{sorted(copy.touched)}")
    added = re.search(r"git add ([^`]*)", (ROOT / "docs" / "adding-a-piece.md").read_text()).group(1)
    assert set(added.replace("\\", " ").replace("<name>", NAME).split()) == copy.touched  # the page's git add line


def test_the_prose_counts_the_seventh_piece_headings_intro_and_readme(copy):
    from prose import disagreements

    nb = json.loads((copy.repo / "exercises" / "lesson.ipynb").read_text())
    text = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    numbers = [int(m) for t in text for m in re.findall(r"^## (\d+)\. ", t, flags=re.M)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) == 12  # one more section, in order
    assert any("## 5. Several heads" in t for t in text)  # after luong's 4, before the decoder's
    assert "Seven code cells start with" in text[0]
    assert disagreements(copy.repo) == []


def test_the_pages_worked_cases_file_is_the_one_graded_here_and_its_helpers_are_utils_own():
    import inspect

    from grader.cases import util

    page = (ROOT / "docs" / "adding-a-piece.md").read_text(encoding="utf-8")
    assert f"```python\n{CASES_FILE}```" in page
    rows = re.findall(r"^\| `util\.(\w+)\(([^)]*)\)` \|", page, flags=re.M)
    assert len(rows) >= 8
    for name, params in rows:
        kinds = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
        own = ", ".join(kinds.get(p.kind, "") + p.name for p in inspect.signature(getattr(util, name)).parameters.values())
        assert params == own, (name, params, own)


def test_the_registry_derives_the_new_pieces_imports_and_stub_digest_from_its_files(copy):
    facts = json.loads((copy.repo / "grader" / "core" / "piece_facts.json").read_text())
    assert facts[NAME]["imports"] == ["from .context import attention_context"]
    stub = (copy.repo / "exercises" / f"{NAME}.py").read_text()
    assert "BEGIN SOLUTION" not in stub and "raise NotImplementedError(\"piece 'multihead'" in stub
    assert 0 < manifest_total(copy.repo)[1] < manifest_total(copy.repo)[0]


def test_the_reference_earns_full_marks_and_the_stub_zero_with_one_line(copy):
    done = copy.grade("--quick", "--format", "json", "--submission", "reference")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    pieces = {p["name"]: (p["score"], p["max_score"]) for p in report["pieces"]}
    assert list(pieces)[3:5] == ["luong", NAME]  # the registry's place: the gradebook's and the report's order
    assert pieces[NAME] == (3, 3) and report["score"] == report["max_score"]
    done = copy.grade(NAME)  # the generated stub in exercises/
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"✗ {NAME}"))
    assert re.fullmatch(rf"✗ {NAME} +0/3 *", lines[at]) and lines[at + 1].strip() == STUB_LINE
    assert not lines[at + 2].startswith("    "), "the stub's failure takes more than one line"


def test_the_notebook_has_the_pieces_cell_and_grading_the_notebook_grades_it(copy):
    nb = json.loads((copy.repo / "exercises" / "lesson.ipynb").read_text())
    ids = [cell["id"] for cell in nb["cells"]]
    at = ids.index(f"cell-piece-{NAME}")
    assert ids[at - 1] == f"cell-{NAME}-md" and ids[at - 2] == "cell-piece-luong"
    done = copy.grade("release", "solutions", str(copy.base / "solutions"), "--no-execute")
    assert done.returncode == 0, done.stdout + done.stderr
    home = copy.base / "notebook"
    shutil.copytree(copy.repo / "exercises", home)  # the stubs: the notebook's cells are graded in their place
    shutil.copyfile(copy.base / "solutions" / "lesson-solutions.ipynb", home / "lesson.ipynb")
    done = copy.grade("--quick", "--submission", str(home / "lesson.ipynb"), NAME)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"✓ {NAME} +3/3", done.stdout)


@pytest.fixture(scope="module")
def release(copy) -> tuple[Path, bytes]:
    """A student release of the copy, its exercises/ holding the reference's files (a solved repository)."""
    done = copy.grade("release", "student", str(copy.base / "release"), "--new-key")
    assert done.returncode == 0, done.stdout + done.stderr
    rel = copy.base / "release"
    key = (copy.base / "release.seal-key").read_bytes().strip()
    assert not (rel / "reference").exists() and not (rel / "grader" / "cases" / f"test_{NAME}.py").exists()
    assert f"`{NAME}.py`" in (rel / "README.md").read_text()  # the students' README lists it
    done = copy.grade(NAME, cwd=rel)  # no key: the public run says the piece has no public check
    assert done.returncode == 0 and "no public check for this piece" in done.stdout, done.stdout + done.stderr
    for path in (copy.repo / "reference").glob("*.py"):
        shutil.copyfile(path, rel / "exercises" / path.name)
    return rel, key


def test_a_sealed_release_grades_it_and_the_workflow_classroom50_and_gradescope_count_it(copy, release):
    rel, key = release
    total, mine = manifest_total(copy.repo)
    tmp = copy.base / "runner"
    tmp.mkdir()
    env = clean_env(ATTNLAB_SEAL_KEY=key.decode())
    done, output = run_grading_step(rel, tmp, sys.executable, [], env, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_file(tmp).read_text())
    assert report["score"] == report["max_score"] == total
    assert {p["name"]: p["score"] for p in report["pieces"]}[NAME] == mine
    shown = run_reporter_step(rel, output, clean_env())
    assert shown.returncode == 0 and f"Points {total}/{total}" in shown.stdout, shown.stdout + shown.stderr
    runner = {"CLASSROOM": "fall26", "ASSIGNMENT": "attention-lab", "SUBMISSION_TAG": "submit/1", "OWNER": "ann",
              "ASSIGNMENT_TYPE": "individual", "COMMIT_URL": "https://github.com/org/r/commit/abc1234",
              "RELEASE_URL": "https://github.com/org/r/releases/tag/submit%2F1"}  # what Classroom 50's runner sets
    (tmp / "c50").mkdir()
    done = subprocess.run([sys.executable, "-I", "grader/workflow.py", "classroom50", str(report_file(tmp)),
                           str(tmp / "c50")], cwd=rel, env=clean_env(**runner), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp / "c50" / "result.json").read_text())
    assert result["score"] == result["max-score"] == total
    assert sum(t["max-score"] for t in result["tests"] if t["piece"] == NAME) == mine
    gradescope = subprocess.run(
        [sys.executable, "-c", "import json, sys; from grader.runner import formats, reporter; "
         "print(formats.render('gradescope', reporter.runs_from_report(json.load(open(sys.argv[1])))))",
         str(report_file(tmp))], cwd=rel, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert gradescope.returncode == 0, gradescope.stderr
    results = json.loads(gradescope.stdout)
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) == total
    assert sum(t["max_score"] for t in results["tests"] if NAME in t["name"]) == mine


def test_grade_batch_has_the_pieces_column(copy):
    students = copy.base / "class"
    shutil.copytree(copy.repo / "reference", students / "ann")
    book = copy.base / "grades.csv"
    done = copy.grade("batch", str(students / "ann"), "--quick", "-j", "1", "--out", str(book))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = list(csv.DictReader(book.open()))
    assert NAME in rows[0] and rows[0][NAME] == "3"
