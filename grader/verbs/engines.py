"""`grade release regrade OUT`: the files that run the class regrade on a machine other than this one.

Three engines, one split: each runs `grade batch --shard K/N` on part K of the class, side by side, then
`grade batch merge` on the parts (docs/regrade.md):

- OUT/.github/workflows/regrade.yml: GitHub Actions, in the instructor's grading repository (clone the roster's
  repositories with `grade batch collect`, a matrix of shards, merge);
- OUT/slurm/: a Slurm job array (regrade.sbatch), its merge (merge.sbatch) and submit.sh, which clones the class
  (`grade batch collect`, where ORG is set) and submits both;
- OUT/kubernetes/: a clone Job (clone-job.yaml: `grade batch collect`), an Indexed Job (regrade-job.yaml), its
  merge (merge-job.yaml), the shared volume (volume.yaml) and the grader's image (Dockerfile), as examples to
  adapt.

With --repository OUT is the whole grading repository instead (`write_repository`): the lab as the regrade runs
it and the engines' files, and no other workflow (not the lab's CI, not the per-push classroom.yml), so that pushing
it starts nothing but what the instructor runs.

The templates are instructor-only (grader/templates/regrade/ stays out of a student release: release._PRIVATE).
"""
from __future__ import annotations

import errno
import os
import shutil
from importlib import resources
from pathlib import Path

# template (under grader/templates/regrade/) -> where it goes under OUT
FILES: dict[str, str] = {
    "regrade.yml": ".github/workflows/regrade.yml",
    "slurm/regrade.sbatch": "slurm/regrade.sbatch",
    "slurm/merge.sbatch": "slurm/merge.sbatch",
    "slurm/submit.sh": "slurm/submit.sh",
    "kubernetes/clone-job.yaml": "kubernetes/clone-job.yaml",
    "kubernetes/regrade-job.yaml": "kubernetes/regrade-job.yaml",
    "kubernetes/merge-job.yaml": "kubernetes/merge-job.yaml",
    "kubernetes/volume.yaml": "kubernetes/volume.yaml",
    "kubernetes/Dockerfile": "kubernetes/Dockerfile",
    "kubernetes/Dockerfile.dockerignore": "kubernetes/Dockerfile.dockerignore",
    "kubernetes/wait.sh": "kubernetes/wait.sh",
}
EXECUTABLE = {"slurm/regrade.sbatch", "slurm/merge.sbatch", "slurm/submit.sh", "kubernetes/wait.sh"}
# what a grading repository holds of the lab: what the regrade installs and reads (as kubernetes/Dockerfile.dockerignore
# lets the image take it); never the lab's workflows, its tests, its CI or a seal key
LAB = ("pyproject.toml", "README.md", "grader", "reference", "exercises", "datasets")
SKIPPED = ("__pycache__", ".pytest_cache")


def templates() -> Path:
    """The folder that holds the templates; FileNotFoundError in a checkout without them (a student release)."""
    folder = Path(str(resources.files("grader") / "templates" / "regrade"))
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"the regrade templates are not in this checkout ({folder / missing[0]}): "
                                "`grade release regrade` runs in the instructor's repository")
    return folder


def write(out: Path) -> list[Path]:
    """Copy every engine's files into `out` (made where missing); returns the paths written, in FILES' order.

    Nothing is overwritten: where any of the files is already there (or a link, even a dangling one), nothing at
    all is written and FileExistsError names the first such path (its `filename`).
    """
    source = templates()
    targets = {name: out / rel for name, rel in FILES.items()}
    for dest in targets.values():
        if os.path.lexists(dest):
            raise FileExistsError(errno.EEXIST, "already there; nothing was written", str(dest))
    written: list[Path] = []
    for name, dest in targets.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(source / name, "rb") as src, open(dest, "xb") as dst:  # "x": never through a file made meanwhile
            shutil.copyfileobj(src, dst)
        if name in EXECUTABLE:
            os.chmod(dest, 0o755)
        written.append(dest)
    return written


def write_repository(out: Path) -> list[Path]:
    """`out` (new, or empty) made the whole grading repository: the lab's files (LAB, without bytecode, links or a
    sealed bundle) and every engine's (`write`); returns the engines' paths. FileExistsError where `out` holds
    anything already: nothing is written."""
    from grader import ROOT

    templates()  # FileNotFoundError first, before anything is written, in a checkout without them
    if os.path.lexists(out) and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(errno.EEXIST, "already there and not empty; nothing was written", str(out))
    for name in LAB:
        here = ROOT / name
        if here.is_file() and not here.is_symlink():
            out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(here, out / name)
        elif here.is_dir() and not here.is_symlink():
            shutil.copytree(here, out / name, ignore=_left_out)
    return write(out)


def _left_out(folder: str, names: list[str]) -> list[str]:
    """What a grading repository never takes: caches, bytecode, a sealed bundle, links."""
    return [n for n in names if n in SKIPPED or n.endswith((".pyc", ".bin")) or os.path.islink(os.path.join(folder, n))]

