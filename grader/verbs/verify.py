"""`grade batch verify FOLDER --release OUT`: each student's per-push Classroom 50 result checked, nothing graded.

FOLDER is what `gh teacher download` wrote (a clone per student with its result.json and results.json; its own
scores.csv is what the pushes posted, signed or not). OUT is the release `grade release classroom50` wrote: its
attestation.json holds the public key derived from the seal key, the classroom, the assignment and the autograder
folder's digest, and no secret. Each student gets one line, `verified S/M` or `forged`, `unsigned`, `replayed`,
`missing` and why (grader/regrade/perpush.py), and the scores.csv written has Classroom 50's columns with a score
for verified students only.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from grader.regrade import perpush, scores
from grader.regrade.classlist import class_list
from grader.regrade.roster import Roster
from grader.runner import attest
from grader.runner.report import safe

WORDS = ("verified", "forged", "unsigned", "replayed", "missing")


class VerifyError(ValueError):
    """What the user gave cannot be verified; str() says what to give instead, `param` names the option."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def username(name: str, release: perpush.Release) -> str:
    """The student a download's folder stands for: its name less `<classroom>-<assignment>-`, as the runner reads it."""
    prefix = release.prefix
    return name[len(prefix):] if name.lower().startswith(prefix.lower()) and len(name) > len(prefix) else name


def verdicts(folder: Path, release: perpush.Release, roster: Roster | None = None, prefix: str | None = None
             ) -> tuple[dict[str, perpush.Verdict], dict[str, dict] | None, list[str]]:
    """Every student's verdict, by name, the roster's details and the lines for the instructor (folders of no
    roster student's, left out): the download's folders (named by username, less the release's prefix), or the
    roster's students (a student without a folder is `missing`)."""
    klass = class_list([folder], roster, release.prefix if prefix is None else prefix)
    found = {name: perpush.Verdict("missing", safe(why, 200)) for name, why in klass.missing.items()}
    for path in klass.paths:
        name = klass.names[path] if roster is not None else username(klass.names[path], release)
        found[name if name not in found else klass.names[path]] = perpush.check(path, release)
    return found, klass.roster, [safe(line, 500) for line in klass.said]


def lines(found: dict[str, perpush.Verdict], roster: dict[str, dict] | None) -> list[dict]:
    """The scores.csv lines: the roster's order (else by name), a score and the signed tag for verified students
    only, the time the runner tagged the push as `datetime` (the document's own is not signed, and is the commit's
    date, which the student sets)."""
    roster = roster or {}
    top = max((v.max_score for v in found.values() if v.verified and isinstance(v.max_score, int)), default=None)
    out = []
    for name in sorted(found, key=lambda n: (roster.get(n, {}).get("order", 0), n.lower(), n)):
        v, who = found[name], roster.get(name, {})
        out.append({"username": who.get("username", name), **{k: who.get(k, "") for k in ("first_name", "last_name",
                                                                                         "email", "section")},
                    "score": str(v.score) if v.verified else "",
                    "max_score": str(v.max_score if v.verified else top or ""),
                    "datetime": v.tagged, "submission_tag": v.submission, "submitted_by": "", "review_url": "",
                    "late": "", "override": "", "commits_after_deadline": ""})
    return out


def main(*, folder: Path, release: Path, out: Path, roster: Roster | None = None, prefix: str | None = None,
         say: Callable[[str], None] = print) -> Counter:
    """Verify the class in `folder` against `release`, say one line a student, write the verified scores.csv to
    `out`; returns how many got each word. Raises perpush.ReleaseError or VerifyError for what the user gave."""
    start = time.monotonic()
    keys = perpush.Release.read(release)
    target = out.resolve()
    if (folder / "scores.csv").resolve() == target:
        raise VerifyError("is the download's own scores.csv (what the pushes posted, signed or not): give the "
                          "verified scores a path of their own", "--out")
    if target.is_relative_to(folder.resolve()):
        raise VerifyError(f"is inside {folder}, the students' download, where it could replace a student's file: "
                          "give the verified scores a path outside it", "--out")
    key_file = release / attest.RELEASE_FILE if release.is_dir() else release
    if key_file.resolve() == target:
        raise VerifyError("is the release's attestation.json, the public key verify reads: give the verified scores "
                          "a path of their own", "--out")
    if not any(p.is_dir() or p.name in ("result.json", "results.json") for p in folder.iterdir()
               if not p.name.startswith(".")):
        raise VerifyError(f"{folder} holds no student's folder: give the folder `gh teacher download` wrote", "FOLDER")
    found, details, notes = verdicts(folder, keys, roster, prefix)
    for name in sorted(found, key=str.lower):
        say(f"{name}: {found[name].cell}")
    for note in notes:
        say(note)
    try:
        scores.write_lines(out, lines(found, details))
    except OSError as e:
        raise VerifyError(f"cannot be written ({e.strerror or e}): give a path in a folder you can write", "--out")
    counts = Counter(v.word for v in found.values())
    said = ", ".join(f"{counts[w]} {w}" for w in WORDS if counts[w])
    say(f"{len(found)} student(s): {said}; verified scores: {out} ({time.monotonic() - start:.1f} s)")
    return counts
