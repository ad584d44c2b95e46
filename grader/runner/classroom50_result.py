"""Classroom 50's result document (`grade --format classroom50`): what its runner reads from ./result.json.

The contract (classroom50/result/v1): the submission's identity, which the runner hands the autograder in its
environment (before validating, the runner overwrites `owner`, `assignment_type` and `datetime` with its own);
integer `score` and `max-score`, the score at most the maximum; and one test per case with integer points. Tests
may carry extra keys, which Classroom 50 keeps: each failed case's hint goes in `hint`. Every field is built here
from the judges' signed records and the runner's environment, never from anything the submission printed.

Where only the public smoke checks ran (a runner without the seal key), the document must not read as a grade:
Classroom 50 takes a result whose tests all pass as `success` and files its score in the gradebook. So each public
check is a test worth 0 points, one more test, never passed, stands for the graded cases and carries the
assignment's whole maximum, and the commit status is `failure` with a summary that says "not graded" (`status`).
"""
from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping

from grader.runner.report import safe, title
from grader.runner.results import PieceRun

SCHEMA = "classroom50/result/v1"
# the runner's environment -> the document's field; REVIEW_URL may be missing (then the commit's link stands in)
IDENTITY = {"CLASSROOM": "classroom", "ASSIGNMENT": "assignment", "SUBMISSION_TAG": "submission",
            "COMMIT_URL": "commit", "RELEASE_URL": "release"}
REQUIRED = ("schema", "classroom", "assignment", "assignment_type", "owner", "submission", "commit", "release",
            "review", "datetime", "score", "max-score", "tests")
DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T([01]\d|2[0-3]):[0-5]\d:[0-5]\dZ$")
PUBLIC = "public check"  # what a test's name starts with when only the public smoke checks ran (no seal key)
NOT_GRADED = ("graded cases: not run on this runner, which holds no seal key; the grade is your instructor's "
              "regrade")  # the test that carries the whole maximum when only the public checks ran


def missing_identity(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The variables Classroom 50's runner sets that are not set here (OWNER or USERNAME counts as one)."""
    gone = [name for name in IDENTITY if not environ.get(name, "").strip()]
    if not (environ.get("OWNER") or environ.get("USERNAME") or "").strip():
        gone.append("OWNER")
    return gone


def result(runs: list[PieceRun], *, public: bool = False, environ: Mapping[str, str] = os.environ,
           now: datetime.datetime | None = None) -> dict:
    """The result document for these runs; `public`: they ran the public smoke checks, not the graded cases."""
    tests = []
    for run in runs:
        for c in run.cases:
            if c.points <= 0:  # point-free cases (the device checks where they pay nothing) are no test of a score
                continue
            name = f"{run.name}: {PUBLIC + ': ' if public else ''}{title(c.name)}"
            worth = 0 if public else c.points  # a public check is no part of the grade
            tests.append({"test-name": name, "passed": bool(c.passed), "score": worth if c.passed else 0,
                          "max-score": worth, "piece": run.name, "hint": "" if c.passed else safe(c.message, 300)})
    if public:
        tests.append({"test-name": NOT_GRADED, "passed": False, "score": 0, "max-score": graded_maximum(),
                      "piece": "", "hint": "this runner ran the public smoke checks only"})
    when = (now or datetime.datetime.now(datetime.timezone.utc)).astimezone(datetime.timezone.utc)
    doc = {"schema": SCHEMA, **{field: environ[name].strip() for name, field in IDENTITY.items()}}
    doc.update(assignment_type=(environ.get("ASSIGNMENT_TYPE") or environ.get("MODE") or "individual").strip(),
               owner=(environ.get("OWNER") or environ.get("USERNAME") or "").strip(),
               review=(environ.get("REVIEW_URL") or environ["COMMIT_URL"]).strip(),
               datetime=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
               score=sum(t["score"] for t in tests), **{"max-score": sum(t["max-score"] for t in tests)}, tests=tests)
    return {key: doc[key] for key in REQUIRED}


def graded_maximum() -> int:
    """The assignment's real maximum: every graded case's points, from the hidden cases' manifest (in the clear)."""
    from grader.runner import manifest

    return sum(c["points"] for cases in manifest.read().values() for c in cases if c["points"] > 0)


def status(doc: dict, *, public: bool) -> tuple[str, str] | None:
    """The commit status and its summary (at most 140 characters) for the runner to post, or None where its own
    (`success` when every test passed, else `failure`, with the score) says what the document is."""
    if not public:
        return None
    checks = [t for t in doc["tests"] if t["test-name"] != NOT_GRADED]
    passed = sum(t["passed"] for t in checks)
    return "failure", (f"not graded: public smoke checks only ({passed} of {len(checks)} passed); the grade is "
                       "your instructor's regrade")[:140]


def posted_status(doc: dict, outputs: str = "") -> str:
    """The commit status Classroom 50's runner posts for `doc`: the one the autograder wrote to $GITHUB_OUTPUT
    (`outputs`, that file's text), else `success` when every test passed (or there are none), else `failure`."""
    written = [line.split("=", 1)[1] for line in outputs.splitlines() if line.startswith("status=")]
    if written:
        return written[-1]
    return "success" if all(t.get("passed") for t in doc.get("tests") or []) else "failure"


def problems(doc: object, environ: Mapping[str, str]) -> list[str]:
    """What breaks the result contract in `doc`, one line each ([] when it holds): the rules Classroom 50's runner
    and score collector apply, and the lab's own (the tests add up to the score)."""
    if not isinstance(doc, dict):
        return ["the document is not a JSON object"]
    found = [f"no {key!r}" for key in REQUIRED if key not in doc]
    found += [f"unexpected key {key!r}" for key in doc if key not in REQUIRED and key not in ("graded_at", "submitted_by")]
    if found:
        return found
    if doc["schema"] != SCHEMA:
        found.append(f"schema is {doc['schema']!r}, not {SCHEMA!r}")
    for name, field in {**IDENTITY, "OWNER": "owner"}.items():
        want = environ.get(name) or (environ.get("USERNAME") if name == "OWNER" else None)
        if name == "SUBMISSION_TAG" or want is None:
            continue
        same = (str(doc[field]).lower() == want.strip().lower()) if field == "owner" else doc[field] == want.strip()
        if not same:  # the runner compares the owner without case, as GitHub's logins are
            found.append(f"{field} is {doc[field]!r}, not {want!r}")
    if not str(doc["submission"]).startswith("submit/"):
        found.append("submission does not start with 'submit/'")
    if doc["assignment_type"] not in ("individual", "group"):
        found.append(f"assignment_type is {doc['assignment_type']!r}")
    for key in ("classroom", "assignment", "owner", "commit", "release", "review"):
        if not isinstance(doc[key], str) or not doc[key]:
            found.append(f"{key} is not a non-empty string")
    if not isinstance(doc["datetime"], str) or not DATETIME.match(doc["datetime"]):
        found.append(f"datetime {doc['datetime']!r} is not YYYY-MM-DDTHH:MM:SSZ")
    found += _points(doc, "the document")
    if not isinstance(doc["tests"], list):
        return found + ["tests is not a list"]
    for i, test in enumerate(doc["tests"]):
        where = f"tests[{i}]"
        if not isinstance(test, dict):
            found.append(f"{where} is not an object")
            continue
        found += [f"{where} has no {key!r}" for key in ("test-name", "passed", "score", "max-score") if key not in test]
        if not isinstance(test.get("test-name"), str) or not test.get("test-name"):
            found.append(f"{where}'s test-name is not a non-empty string")
        if not isinstance(test.get("passed"), bool):
            found.append(f"{where}'s passed is not a boolean")
        found += _points(test, where)
    if not found and sum(t["score"] for t in doc["tests"]) != doc["score"]:
        found.append("the tests' scores do not add up to score")
    return found


def _points(obj: dict, where: str) -> list[str]:
    score, top = obj.get("score"), obj.get("max-score")
    bad = [f"{where}'s {key} is not a non-negative integer" for key, value in (("score", score), ("max-score", top))
           if not isinstance(value, int) or isinstance(value, bool) or value < 0]
    return bad or ([f"{where}'s score {score} is above its max-score {top}"] if score > top else [])


def to_classroom50(runs: list[PieceRun], quick: tuple[int, int] | None = None) -> str:
    """The result document as JSON (never quick: the CLI refuses --quick with this format)."""
    import json

    from grader.runner import layout

    return json.dumps(result(runs, public=layout.current().public), indent=2)
