"""What a student's per-push Classroom 50 result is worth: its signature checked against the release, nothing graded.

`gh teacher download ORG CLASSROOM ASSIGNMENT` writes, per student, a clone `<classroom>-<assignment>-<username>/`
holding `results.json` (every submit/* release's result.json, newest first, each beside its release's tag) and
`result.json` (the newest one again). `grade batch collect` clones hold neither, unless the student committed one.
The release's attestation.json (`grade release classroom50`) names the public key, classroom, assignment and the
autograder folder's digest. A student's newest result is then, in one word (`Verdict.word`):

- verified: signed by the autograder folder of this release, holding this key, for this repository, commit,
  submission (the release it was found on), classroom and assignment, and unchanged since;
- forged: the signature does not hold for the document (a score or test edited, another key), or the document
  disagrees with what was signed (its commit link);
- unsigned: no signature (written by hand, by the hosted route's public checks, or by a release before signing);
- replayed: a valid signature made for another repository (a classmate's result copied in), submission or commit
  (an older push's), classroom or assignment, or by another autograder folder (last term's, with the same key);
- missing: no result to read.
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.core.files import Refused, is_link, read_regular
from grader.runner import attest
from grader.runner.report import safe

MAX_BYTES = 10 * 1024 * 1024  # Classroom 50's own cap on a result.json (collect_scores.py, download.go)
MAX_DEPTH = 32  # the runner writes 4 levels; a deeper document is made to overflow the checks' own recursion
CANONICAL_TAG = re.compile(r"^submit/(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})Z-([0-9a-f]{7})$")  # the runner's


class ReleaseError(ValueError):
    """The release folder holds no attestation.json this can read; str() says what to give instead."""


@dataclass(frozen=True)
class Release:
    """What attestation.json says a signed result must match."""

    classroom: str
    assignment: str
    bundle: str
    public_key: str
    key_id: str

    @property
    def prefix(self) -> str:
        """The start of every student's repository name (Classroom 50's `<classroom>-<assignment>-`)."""
        return f"{self.classroom}-{self.assignment}-"

    @classmethod
    def read(cls, folder: Path) -> Release:
        path = folder / attest.RELEASE_FILE if folder.is_dir() else folder
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            fields = [data[k] for k in ("classroom", "assignment", "bundle", "public-key", "key-id")]
            if data.get("schema") != attest.RELEASE_SCHEMA or not all(isinstance(f, str) and f for f in fields):
                raise ValueError("not an attestation key file")
            if len(base64.b64decode(fields[3], validate=True)) != 32:
                raise ValueError("its public key is not an Ed25519 key")
        except FileNotFoundError:
            raise ReleaseError(f"{path} does not exist: give the folder `grade release classroom50 OUT` wrote (OUT), "
                               "which holds attestation.json; a release made before results were signed has none, so "
                               "make the release again with the same key (it reuses OUT.seal-key)") from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ReleaseError(f"{path} is not the attestation.json `grade release classroom50` writes "
                               f"({safe(str(e), 120)}): make the release again with the same key") from None
        return cls(*fields)


@dataclass(frozen=True)
class Verdict:
    """One student's per-push result, in a word, and why."""

    word: str  # verified, forged, unsigned, replayed or missing
    why: str = ""
    score: int | None = None
    max_score: int | None = None
    submission: str = ""
    tagged: str = ""  # when the runner tagged the push (the signed tag's own UTC time), else ""

    @property
    def verified(self) -> bool:
        return self.word == "verified"

    @property
    def cell(self) -> str:
        """`verified 70/73`, or the word and why (one line, escaped)."""
        return f"verified {self.score}/{self.max_score}" if self.verified else f"{self.word}: {self.why}"


def _json(data: bytes) -> object:
    return json.loads(data.decode("utf-8"))


def _present(path: Path) -> bool:
    return path.exists() or is_link(path)


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` nests lists and objects deeper than `limit` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return False


def newest(repo: Path) -> tuple[object, str | None] | Verdict:
    """The newest result the folder holds and the tag of the release it came from (None where only result.json is
    there: then no release vouches for the submission), or the verdict where there is none to read."""
    if not repo.is_dir() or is_link(repo):
        return Verdict("missing", "not a repository folder (a file, or a link never followed)")
    history, result = repo / "results.json", repo / "result.json"
    try:
        entries = _json(read_regular(history, MAX_BYTES, "results.json") or b"null") if _present(history) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("result") is not None:
                tag = entry.get("submission_tag")
                return entry["result"], tag if isinstance(tag, str) else ""
        if not _present(result):
            return Verdict("missing", "no result.json or results.json: no push was graded, or the folder is not one "
                                      "`gh teacher download` wrote (grade batch collect fetches no results)")
        data = read_regular(result, MAX_BYTES, "result.json")
    except Refused as e:
        return Verdict("missing", f"{e}; nothing else stands for a result")
    except (ValueError, RecursionError):
        return Verdict("unsigned", "results.json is not the JSON `gh teacher download` writes")
    if data is None:
        return Verdict("missing", f"its result.json is over {MAX_BYTES >> 20} MiB, which Classroom 50 does not read")
    try:
        return _json(data), None
    except (ValueError, RecursionError):
        return Verdict("unsigned", "its result.json is not JSON")


def check(repo: Path, release: Release) -> Verdict:
    """The verdict on the newest result in a student's repository folder (a download's, or `repo/exercises`)."""
    repo = repo.parent if repo.name == "exercises" else repo
    try:
        found = newest(repo)
        if isinstance(found, Verdict):
            return found
        doc, tag = found
        if too_deep(doc):
            return Verdict("unsigned", f"its result nests deeper than {MAX_DEPTH} levels, which the autograder never "
                                       "writes")
        return judge(doc, tag, repo.name, release)
    except Exception as e:  # noqa: BLE001 - one student's odd file must cost no classmate their verdict
        return Verdict("unsigned", f"its result could not be checked ({type(e).__name__}): not a grade")


def judge(doc: object, tag: str | None, repo_name: str, release: Release) -> Verdict:
    """The verdict on `doc`, found in the repository folder `repo_name` on the release tagged `tag` (None: unknown)."""
    if not isinstance(doc, dict):
        return Verdict("unsigned", "its result is not a JSON object")
    try:
        signed = attest.verify(doc, release.public_key)
    except attest.Unsigned:
        tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
        public = any(isinstance(t, dict) and ": public check: " in str(t.get("test-name")) for t in tests)
        return Verdict("unsigned", "the public smoke checks of a runner without the key: not a grade" if public else
                       "no signature: not written by this release's autograder on the runner that holds the key")
    except attest.Forged as e:
        return Verdict("forged", safe(str(e), 300))
    why = replayed(doc, signed, tag, repo_name, release)
    if why:
        return Verdict("replayed", why)
    link = f"/{signed.repository}/commit/{signed.commit}".lower()
    if not str(doc.get("commit", "")).lower().endswith(link):
        return Verdict("forged", f"its commit link {said(doc.get('commit'))} is not the signed commit "
                                 f"{said(signed.repository)}@{said(signed.commit[:12])}")
    submission = str(doc["submission"])
    when = CANONICAL_TAG.match(submission)
    return Verdict("verified", score=doc["score"], max_score=doc["max-score"], submission=submission,
                   tagged=f"{when[1]}T{when[2]}:{when[3]}:{when[4]}Z" if when else "")


def said(value: object) -> str:
    """A value the student chose, as a message may show it: one line, escaped, at most 100 characters."""
    return safe(str(value), 100)


def replayed(doc: dict, signed: attest.Signed, tag: str | None, repo_name: str, release: Release) -> str:
    """Why a validly signed `doc` was made for another place than where it was found ("" where it was not)."""
    if signed.repository.rpartition("/")[2].lower() != repo_name.lower():
        return (f"made for the repository {said(signed.repository)}, found in {said(repo_name)}: another's result "
                "copied in")
    if tag is not None and doc.get("submission") != tag:
        return (f"made for the submission {said(doc.get('submission'))}, found on the release {said(tag)}: an earlier "
                "push's result put on a later one")
    short = CANONICAL_TAG.match(tag or "")
    if short and not signed.commit.lower().startswith(short[5]):
        return (f"made for the commit {said(signed.commit[:12])}, but the release {said(tag)} is of the commit "
                f"{short[5]}")
    for field, want in (("classroom", release.classroom), ("assignment", release.assignment)):
        if doc.get(field) != want:
            return f"made for the {field} {said(doc.get(field))}, not {want}"
    if signed.bundle != release.bundle:
        return (f"graded by another autograder folder (digest {said(signed.bundle[:12])}, this release's "
                f"{release.bundle[:12]}): another release's autograder on a runner with the same key, or a published "
                "folder that differs from the release's")
    return ""
