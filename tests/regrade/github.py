"""A class on a stand-in GitHub, for tests/regrade: local git repositories laid out OWNER/NAME, as the stand-in
`gh` (fakegh/gh) serves them with `gh repo clone` and `gh repo list`, and the roster that names their students."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FAKES = Path(__file__).parent / "fakegh"
BIN = Path(sys.executable).parent  # the venv's grade, python, zizmor and check-jsonschema
ROSTER_HEADER = "username,first_name,last_name,email,section,github_id,role\n"


def base_env(home: Path) -> dict[str, str]:
    """A clean environment, as a fresh runner or cluster node has: the stand-ins first on PATH, then the venv (whose
    `grade` is the project's, installed as the README says)."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.pathsep.join([str(FAKES), str(BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(home), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1"}


def commit(repo: Path, when: str, files: dict[str, Path | str]) -> None:
    """Commit `files` (repository path -> file to copy, or text) at `when`, the time the student's machine stamps."""
    for name, source in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copyfile(source, repo / name)
        else:
            (repo / name).write_text(source)
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "student",
           "GIT_AUTHOR_EMAIL": "student@example.com", "GIT_COMMITTER_NAME": "student",
           "GIT_COMMITTER_EMAIL": "student@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    steps = [["add", "-A"], ["commit", "-q", "-m", when]]
    for args in ([["init", "-q", "-b", "main"]] if not (repo / ".git").exists() else []) + steps:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def commits(repo: Path) -> int:
    """How many commits HEAD has: a clone with its whole history has them all."""
    done = subprocess.run(["git", "-c", "safe.directory=*", "rev-list", "--count", "HEAD"], cwd=repo,
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def roster_csv(path: Path, rows: list[tuple[str, ...]]) -> Path:
    """Classroom 50's roster.csv: (username, first_name, last_name, email, section, github_id, role) a row."""
    path.write_text(ROSTER_HEADER + "".join(",".join(row) + "\n" for row in rows))
    return path
