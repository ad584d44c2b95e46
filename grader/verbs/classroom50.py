"""`grade release classroom50 OUT`: the lab as a Classroom 50 assignment.

Classroom 50 (foundation50/classroom50) grades in each student's repository with a workflow that calls the
organisation's reusable runner; the runner downloads the assignment's autograder folder from the organisation's
GitHub Pages site and runs its `autograder.py` in the student's checkout. That folder is public (anyone who can
read the Pages site can download it) and the grade job is given no secret, so it holds nothing in the clear that
answers a piece: the graded cases, the reference and the answering lab code travel sealed, as in a student
release, and the key that opens them lives only on the instructor's own self-hosted runner (/etc/attnlab/seal-key).
On a GitHub-hosted runner there is no key, and the public smoke checks run instead, named as such.

OUT/
  template/                                       the template repository: the student release, less every
                                                  workflow (Classroom 50 adds its own) and the sealed bundle
  config/CLASSROOM/autograders/ASSIGNMENT/        copy into the organisation's `classroom50` config repository:
      autograder.py, lab/grader/..., lab/datasets/  the autograder and the grader it runs (sealed cases inside)
  runtime.json                                    the assignment's `runtime` block for assignments.json
  attestation.json                                what `grade batch verify` checks the per-push results against:
                                                  the public key derived from the seal key and the folder's digest
  SETUP.md                                        the steps, with these names filled in
OUT.seal-key                                      the key (mode 0600), as `grade release student` keeps it
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from grader.release import build as release
from grader.runner import attest
from grader.runner.classroom50_result import graded_maximum

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{1,38}$")  # Classroom 50's own rule for classroom and assignment names
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # and for a runs-on label
HOSTED_PYTHON = "3.12"  # its default, 3.14, is newer than the lab supports
BUNDLE_LIMIT = 10 * 1024 * 1024  # the runner refuses a downloaded autograder folder larger than this, packed
KEY_ON_RUNNER = "/etc/attnlab/seal-key"


def runtime(runs_on: tuple[str, ...]) -> dict:
    """The assignment's runtime: the self-hosted runner that holds the key, or (no labels) a GitHub-hosted one."""
    return {"runs-on": list(runs_on)} if runs_on else {"runs-on": "ubuntu-latest", "python": HOSTED_PYTHON}


def check_names(classroom: str, assignment: str, runs_on: tuple[str, ...]) -> None:
    for what, value in (("classroom", classroom), ("assignment", assignment)):
        if not SLUG.match(value):
            raise release.ReleaseError(f"--{what} {value!r} is not a Classroom 50 name: lowercase letters, digits and "
                                       "dashes, 2 to 39 characters, starting with a letter or digit")
    bad = [label for label in runs_on if not LABEL.match(label)]
    if bad or len(runs_on) > 10:
        raise release.ReleaseError(f"--runs-on takes 1 to 10 runner labels of letters, digits, '.', '_' and '-' "
                                   f"(not {', '.join(bad) or f'{len(runs_on)} labels'})")


def build(out: Path, *, classroom: str, assignment: str, runs_on: tuple[str, ...], key: bytes,
          key_path: Path | None = None, notes: list[str] | None = None) -> dict[str, Path]:
    """Write OUT (see the module's docstring) sealed with `key`; returns the named paths written. `notes` receives
    the release's line about working-tree files that differ from what it generates (release.student)."""
    check_names(classroom, assignment, runs_on)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    bundle = out / "config" / classroom / "autograders" / assignment
    with tempfile.TemporaryDirectory(prefix="attnlab-classroom50-") as tmp:
        built, _ = release.student(Path(tmp) / "release", key, notes)
        template = out / "template"
        shutil.copytree(built, template)
        shutil.rmtree(template / ".github" / "workflows", ignore_errors=True)  # Classroom 50 writes autograde.yaml
        if template.joinpath(".github").is_dir() and not any(template.joinpath(".github").iterdir()):
            template.joinpath(".github").rmdir()
        (template / "grader" / "sealed.bin").unlink()  # students grade the public checks; the runner has the cases
        for part in ("grader", "datasets"):
            shutil.copytree(built / part, bundle / "lab" / part)
    text = (resources.files("grader") / "templates" / "classroom50" / "autograder.py").read_text(encoding="utf-8")
    (bundle / "autograder.py").write_text(text.replace("@TORCH@", release.TORCH).replace("@TORCH_INDEX@", release.TORCH_INDEX))
    (out / "runtime.json").write_text(json.dumps({"runtime": runtime(runs_on)}, indent=2) + "\n")
    (out / attest.RELEASE_FILE).write_text(json.dumps(attestation(bundle, classroom, assignment, key), indent=2) + "\n")
    guide = (resources.files("grader") / "templates" / "classroom50" / "SETUP.md").read_text(encoding="utf-8")
    (out / "SETUP.md").write_text(guide.format(classroom=classroom, assignment=assignment, key_file=KEY_ON_RUNNER,
                                               max_score=graded_maximum(), torch=release.TORCH,
                                               torch_index=release.TORCH_INDEX,
                                               key_path=key_path or release.key_path(out),
                                               labels=", ".join(runs_on) or "(GitHub-hosted)",
                                               runtime=json.dumps(runtime(runs_on))))
    return {"template": template, "bundle": bundle, "runtime": out / "runtime.json", "setup": out / "SETUP.md",
            "attestation": out / attest.RELEASE_FILE}


def attestation(bundle: Path, classroom: str, assignment: str, key: bytes) -> dict:
    """What a signed per-push result is checked against, with no secret in it: the public key derived from the seal
    key, the autograder folder's digest (as the runner computes it from the folder it extracts) and the names."""
    public = attest.public_key(key)
    return {"schema": attest.RELEASE_SCHEMA, "classroom": classroom, "assignment": assignment,
            "bundle": attest.bundle_digest(bundle), "public-key": public,
            "key-id": attest.key_id(base64.b64decode(public))}


def packed_size(bundle: Path) -> int:
    """The size of the folder as Classroom 50's publish step packs it (tar, gzip), which its runner caps."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(bundle, arcname=bundle.name)
    return buf.tell()


def main(*, out: Path, classroom: str, assignment: str, runs_on: tuple[str, ...], key_file: Path | None,
         env_key: bytes | None, new_key: bool) -> list[str]:
    """`grade release classroom50`: build OUT with the reused (or a new) seal key; returns the lines to print."""
    check_names(classroom, assignment, runs_on)  # before a key is chosen or anything is written
    chosen = release.release_key(out, key_file=key_file, env_key=env_key, new=new_key)
    writes = chosen.origin == "new" or chosen.origin == "env" and not chosen.path.is_file()
    if writes:
        release.private_folders(chosen.path.parent)  # before OUT is made with the usual mode
    notes: list[str] = []
    paths = build(out, classroom=classroom, assignment=assignment, runs_on=runs_on, key=chosen.key, key_path=chosen.path,
                  notes=notes)
    if writes:
        release.write_key(chosen.path, chosen.key)
    size = packed_size(paths["bundle"])
    if size > BUNDLE_LIMIT:
        raise release.ReleaseError(f"the autograder folder packs to {size // 1024} KB, over Classroom 50's "
                                   f"{BUNDLE_LIMIT // 1024} KB limit")
    where = ("the self-hosted runner labelled " + ", ".join(runs_on) + f" must hold the key at {KEY_ON_RUNNER}"
             if runs_on else "GitHub-hosted runners hold no key: each push runs the public checks only")
    return [f"wrote the template repository to {paths['template']}",
            f"wrote the autograder folder to {paths['bundle']} ({size // 1024} KB packed)",
            f"wrote {paths['runtime']} and the steps in {paths['setup']}",
            f"wrote {paths['attestation']}: each push's signed result is checked against it by `grade batch verify`",
            f"seal key: {chosen.path} ({chosen.origin}); {where}", *notes]
