"""Gradescope: the autograder zip (`grade release gradescope OUT`) and what it runs for each submission.

Gradescope unzips the autograder into /autograder/source, runs setup.sh once when the image is built,
then run_autograder for every submission: the submission lies in /autograder/submission (the files a
student uploaded: the .py pieces, a folder or a .zip of them, or the lesson notebook) and the results
go to /autograder/results/results.json. The zip is the instructor's, never a student's: it holds the
reference and the hidden cases in the clear, and the worker jail keeps them from the submission.

    python -m grader.verbs.gradescope [ROOT]    # what run_autograder calls; ROOT defaults to /autograder
"""
from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from grader import ROOT

if TYPE_CHECKING:
    from grader.runner.results import Limits


def build(out: Path) -> Path:
    """Write the autograder zip: setup.sh and run_autograder at its root, beside the lab's tracked files."""
    from grader.release.build import tracked_files

    if out.suffix != ".zip":
        out = out / "autograder.zip" if out.is_dir() else out.with_suffix(".zip")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("setup.sh", "run_autograder"):  # grader/templates/gradescope/, written to the zip's root
            text = (resources.files("grader") / "templates" / "gradescope" / name).read_text(encoding="utf-8")
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable, as Gradescope runs them
            zf.writestr(info, text)
        for rel in tracked_files():
            if not rel.startswith((".github/", ".ci/", "bench/", "tests/", "exercises/")):
                zf.write(ROOT / rel, rel)
    return out


def find(submission: Path, scratch: Path, notes: list[str] | None = None) -> Path:
    """The staged folder to grade: the one holding most of the lab's files anywhere in the upload, else the
    lesson notebook's extracted cells, else the pieces inside an uploaded .zip.

    Read as `grade batch` reads a submission (grader.regrade.intake.unpack), so the rule is the one `grade` and Classroom
    follow: beside lesson.ipynb, a piece whose .py file is still the untouched stub is graded from its cell
    (notebook.combine); `notes` says when the notebook could not be read and only the .py files were."""
    from grader.regrade.intake import Refused as BadSubmission, unpack
    from grader.core.pieces import MODULES

    folders: dict[Path, int] = {}
    for path in submission.rglob("*.py"):
        if path.stem in MODULES and path.is_file() and not path.is_symlink():
            folders[path.parent] = folders.get(path.parent, 0) + 1
    if folders:
        return unpack(max(sorted(folders), key=folders.get), scratch, notes)
    for pattern in ("*.ipynb", "*.zip"):
        # never Jupyter's .ipynb_checkpoints/ (or another hidden folder's) copy; lesson.ipynb before any other name
        found = sorted((p for p in submission.rglob(pattern)
                        if not any(part.startswith(".") for part in p.relative_to(submission).parts)),
                       key=lambda p: (p.name != "lesson.ipynb", len(p.parts), str(p)))
        if found:
            return unpack(found[0], scratch, notes)
    names = ", ".join(f"{m}.py" for m in MODULES)
    raise BadSubmission(f"the upload holds none of the lab's files ({names}), no notebook and no .zip; upload those")


def run(root: Path, pieces: list[str] | None = None, limits: Limits | None = None) -> dict:
    """Grade root/submission (every piece in full, unless `pieces` and `limits` say otherwise) and write
    root/results/results.json; returns the results."""
    from grader.runner import report
    from grader.runner.formats import grader_error
    from grader.core.files import Refused as BadSubmission
    from grader.runner.schedule import grade
    from grader.runner.display import resolve_seed
    from grader.core.host import StartError
    from grader.core.pieces import PIECES
    from grader.runner.results import Limits

    results_path = root / "results" / "results.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="attnlab-gradescope-") as tmp:
        notes: list[str] = []
        try:
            folder = find(root / "submission", Path(tmp) / "unpacked", notes)
            runs = grade(submission=folder, pieces=pieces or list(PIECES), seed=resolve_seed(None),
                         limits=limits or Limits())
            results = report.gradescope_results(runs)
            if notes:  # graded, and what was left out
                results["output"] += "".join(f"; {report.safe(n, 300)}" for n in notes)
        except StartError as e:
            results = json.loads(grader_error("gradescope", str(e)))
        except BadSubmission as e:
            results = {"score": 0, "tests": [], "output": f"Not graded: {report.safe(str(e), 500)}"}
        except Exception as e:  # noqa: BLE001 - Gradescope must always get a results file, with the reason
            # the grader's own failure, as a StartError is: no score, so Gradescope counts a failed run, not a zero
            results = json.loads(grader_error("gradescope", f"{type(e).__name__}: {report.safe(str(e), 300)}"))
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    done = run(Path(sys.argv[1] if len(sys.argv) > 1 else "/autograder"))
    print(done.get("output", ""))
    sys.exit(0 if "score" in done else 2)  # no score: the grader failed, and Gradescope shows that, not a zero
