"""One PyTorch everywhere: what the graders install is what every README and template tells people to install.

The version is defined once (grader.release.build.TORCH); the Classroom workflow, Gradescope's setup.sh and the regrade
engines install it, and a student who follows their README must get the same build, or a score can differ between
their laptop and the graded run.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

from grader import ROOT
from grader.release.build import TORCH, TORCH_INDEX

PIP_INSTALL = re.compile(r"\bpip3? install\b([^`&;|#\n]*)")  # its arguments, up to the end of the shell command
TORCH_REQUIREMENT = re.compile(r"torch(\[[\w,]+\])?\s*([<>=!~]=?.*)?$")  # torch, torch==X, torch>=X, ...
COMMENT = re.compile(r"(^|\s)#.*")  # a script's comment (it may say what a plain `pip install torch` would fetch)
GRADERS = (".github/workflows/classroom.yml", "grader/templates/gradescope/setup.sh")


def command_lines(path: Path) -> list[str]:
    """The lines of `path` that can be commands: a script's without its comments, only the fenced code blocks of a
    Markdown file (its prose may say what a plain `pip install torch` would fetch)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if path.suffix != ".md":
        return [COMMENT.sub("", line) for line in lines]
    fenced, inside = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            fenced.append(line)
    return fenced


def torch_installs(path: Path) -> list[str]:
    """Every torch requirement a `pip install` in `path` names, as written."""
    found = []
    for line in command_lines(path):
        for match in PIP_INSTALL.finditer(line):
            try:
                args = shlex.split(match.group(1))
            except ValueError:
                args = match.group(1).split()
            found += [arg for arg in args if TORCH_REQUIREMENT.match(arg)]
    return found


def text_files(root: Path) -> list[Path]:
    """The files under `root` that can hold an install command: scripts, Markdown, YAML, code (a Dockerfile too)."""
    kinds = ("", ".md", ".sh", ".yml", ".yaml", ".txt", ".ipy", ".py", ".toml", ".cfg")
    return [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in kinds and ".git" not in p.parts]


def test_the_graders_install_the_one_pinned_torch_from_the_cpu_index():
    for rel in GRADERS:
        text = (ROOT / rel).read_text()
        assert torch_installs(ROOT / rel) == [TORCH], rel
        assert f"{TORCH} --index-url {TORCH_INDEX}" in text, rel
    if importlib.util.find_spec("grader.verbs.classroom50") is not None:  # Classroom 50's autograder installs its TORCH
        from grader.verbs import classroom50

        assert getattr(classroom50, "TORCH", TORCH) == TORCH


def test_every_install_line_of_a_readme_or_template_names_the_torch_the_graders_install():
    files = [ROOT / "README.md", *text_files(ROOT / "grader" / "templates"), ROOT / ".github" / "workflows" / "classroom.yml"]
    named = {str(p.relative_to(ROOT)): torch_installs(p) for p in files}
    assert named["README.md"] and named["grader/templates/student/README.md"]  # the check finds what it checks
    wrong = {rel: reqs for rel, reqs in named.items() if any(r != TORCH for r in reqs)}
    assert not wrong, f"these install another torch than the graders' {TORCH}: {wrong}"


def test_every_install_line_a_student_release_ships_names_the_torch_the_graders_install(release):
    rel, _ = release
    named = {str(p.relative_to(rel)): torch_installs(p) for p in text_files(rel)}
    assert named["README.md"] == [TORCH] and named[".github/workflows/classroom.yml"] == [TORCH]
    wrong = {path: reqs for path, reqs in named.items() if any(r != TORCH for r in reqs)}
    assert not wrong, f"these install another torch than the graders' {TORCH}: {wrong}"
    readme = " ".join(command_lines(rel / "README.md"))
    assert f"pip install {TORCH} --index-url {TORCH_INDEX}" in readme  # the CPU build, as the graders take it


def test_an_unpinned_or_other_torch_is_found_in_a_script_and_in_a_readmes_code_but_not_in_its_prose(tmp_path):
    (tmp_path / "README.md").write_text("A plain `pip install torch` fetches CUDA's build.\n\n```bash\n"
                                        "pip install torch --index-url x && pip install -e .\n```\n")
    (tmp_path / "setup.sh").write_text("python3 -m pip install --no-cache-dir 'torch>=2.2' numpy\npip install -e .\n"
                                       "# not `pip install torch`: CUDA's build\n")
    assert torch_installs(tmp_path / "README.md") == ["torch"]
    assert torch_installs(tmp_path / "setup.sh") == ["torch>=2.2"]
