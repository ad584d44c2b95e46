"""Signed per-push results under attack: a student who owns their repository, its releases and what their pushes
post (never the seal key, never the runner outside the jail) tries to get `grade batch verify` to report a score
their code did not earn, to call something not theirs `verified`, to make a verdict read two ways, or to cost the
whole class its verdicts with one malformed file.

Every result here is a made-up document signed with grader.runner.attest and a made-up key, as the autograder
signs it; nothing is graded. The cases of the holes it found (deep nesting, the key shown raw, a folder named
result.json, an unguarded --out, a folder dropped without a word) stay, each fixed.
"""
from __future__ import annotations

import base64
import copy
import csv
import hashlib
import json
import os
import sys
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grader.cli import cli
from grader.regrade import perpush
from grader.runner import attest, classroom50_result
from grader.runner.results import CaseResult, PieceRun

CLASSROOM, ASSIGNMENT = "fall26", "attention-lab"
PREFIX = f"{CLASSROOM}-{ASSIGNMENT}-"
KEY = Fernet.generate_key()
BUNDLE = hashlib.sha256(b"the release's autograder folder").hexdigest()


def sha_of(user: str, push: int = 1) -> str:
    return hashlib.sha1(f"{user} {push}".encode()).hexdigest()


def tag_of(user: str, push: int = 1) -> str:
    return f"submit/2026-12-0{push}T10-00-00Z-{sha_of(user, push)[:7]}"


def env_of(user: str, push: int = 1, *, assignment: str = ASSIGNMENT, owner: str = "org") -> dict[str, str]:
    repo = f"{owner}/{PREFIX}{user}"
    sha, tag = sha_of(user, push), tag_of(user, push)
    return {"CLASSROOM": CLASSROOM, "ASSIGNMENT": assignment, "SUBMISSION_TAG": tag, "OWNER": user,
            "GITHUB_REPOSITORY": repo, "GITHUB_SHA": sha, "COMMIT_URL": f"https://github.com/{repo}/commit/{sha}",
            "RELEASE_URL": f"https://github.com/{repo}/releases/tag/{tag.replace('/', '%2F')}"}


def signed(user: str, points=((2, True), (3, True), (4, False)), push: int = 1, *, repository: str | None = None,
           **env) -> dict:
    """The result the keyed autograder writes for this push, signed as it signs it, then as the runner posts it."""
    e = env_of(user, push, **env)
    runs = [PieceRun("encoder", [CaseResult(f"test_case_{i}", p, ok, "" if ok else "off")
                                 for i, (p, ok) in enumerate(points)])]
    doc = attest.sign(classroom50_result.result(runs, environ=e), KEY, repository=repository or e["GITHUB_REPOSITORY"],
                      commit=e["GITHUB_SHA"], bundle=BUNDLE)
    doc.update(owner=user, datetime="2026-12-01T09:58:00Z", graded_at="2026-12-01T10:01:00Z")
    return json.loads(json.dumps(doc))


@pytest.fixture
def release(tmp_path) -> Path:
    """A release folder holding only what verify reads: attestation.json for the made-up key and folder."""
    out = tmp_path / "release"
    out.mkdir()
    public = attest.public_key(KEY)
    (out / attest.RELEASE_FILE).write_text(json.dumps({
        "schema": attest.RELEASE_SCHEMA, "classroom": CLASSROOM, "assignment": ASSIGNMENT, "bundle": BUNDLE,
        "public-key": public, "key-id": attest.key_id(base64.b64decode(public))}, indent=2))
    return out


def clone(folder: Path, user: str, history: list[tuple[str, object]] | None = None, *, raw: str | None = None,
          name: str | None = None) -> Path:
    """A student's clone as `gh teacher download` writes it: results.json (tag and result per release, newest
    first) and result.json (the newest result), or `raw` as the result.json's text."""
    repo = folder / (name or f"{PREFIX}{user}")
    (repo / "exercises").mkdir(parents=True)
    if history:
        (repo / "results.json").write_text(json.dumps([{"submission_tag": t, "result": d} for t, d in history]))
        (repo / "result.json").write_text(json.dumps(history[0][1], indent=2))
    if raw is not None:
        (repo / "result.json").write_text(raw)
    return repo


def honest(folder: Path, user: str = "alice") -> Path:
    return clone(folder, user, [(tag_of(user), signed(user))])


def run_verify(folder: Path, release: Path, *extra: str, out: Path | None = None):
    """`grade batch verify`: the click result, each student's line (the last said for a name), every line."""
    out = out or folder.parent / "verified.csv"
    done = CliRunner().invoke(cli, ["batch", "verify", str(folder), "--release", str(release), "--out", str(out),
                                    *extra])
    said = done.output.splitlines()
    lines = dict(line.split(": ", 1) for line in said if ": " in line and "student(s)" not in line)
    return done, lines, said


def crashed(done) -> bool:
    return done.exception is not None and not isinstance(done.exception, SystemExit)


# --- holes -----------------------------------------------------------------------------------------------------


def test_a_result_nested_to_the_edge_of_the_json_parser_costs_no_classmate_their_verdict(tmp_path, release):
    folder = tmp_path / "class"
    honest(folder)
    att = {"version": attest.VERSION, "repository": "org/x", "commit": "c", "bundle": "b", "key": "k",
           "signature": "AAAA"}
    limit = sys.getrecursionlimit()
    for depth in range(limit - 300, limit):  # the window (loads passes, dumps overflows) is a frame or two wide
        nested = "[" * depth + "]" * depth
        clone(folder, f"m{depth}", raw='{"tests":[{"attestation":' + json.dumps(att) + ',"test-name":' + nested + "}]}")
    done, lines, _ = run_verify(folder, release)
    assert not crashed(done), repr(done.exception)
    assert done.exit_code == 1 and lines["alice"] == "verified 5/9"


def test_a_lone_surrogate_in_a_forged_attestations_key_costs_no_classmate_their_verdict(tmp_path, release):
    folder = tmp_path / "class"
    honest(folder)
    doc = signed("mallory")
    doc["tests"][0][attest.FIELD]["key"] = "\ud800"  # json.dumps writes it as the escape \ud800, which loads reads back
    doc["score"] = doc["max-score"]
    clone(folder, "mallory", [(tag_of("mallory"), doc)])
    done, lines, _ = run_verify(folder, release)
    assert not crashed(done), repr(done.exception)
    assert lines["alice"] == "verified 5/9" and lines["mallory"].startswith("forged")
    assert (tmp_path / "verified.csv").is_file()


def test_a_forged_attestations_key_cannot_print_a_verdict_line_for_a_classmate(tmp_path, release):
    folder = tmp_path / "class"
    clone(folder, "alice")  # no result: alice is missing
    doc = signed("mallory")
    doc["tests"][0][attest.FIELD]["key"] = "\nalice: verified"  # 16 characters, all of them shown
    doc["score"] = doc["max-score"]
    clone(folder, "mallory", [(tag_of("mallory"), doc)])
    done, _, said = run_verify(folder, release)
    assert not crashed(done)
    assert [line for line in said if line.startswith("alice: ")] == [line for line in said
                                                                    if line.startswith("alice: missing")]
    cell = perpush.check(folder / f"{PREFIX}mallory", perpush.Release.read(release)).cell  # grade batch's per_push too
    assert cell.isprintable(), repr(cell)


def test_out_naming_the_releases_key_file_or_a_students_result_is_a_usage_error(tmp_path, release):
    folder = tmp_path / "class"
    repo = honest(folder)
    for target in (release / attest.RELEASE_FILE, repo / "result.json"):
        before = target.read_bytes()
        done, _, _ = run_verify(folder, release, out=target)
        assert done.exit_code == 2 and "Traceback" not in done.output, done.output
        assert target.read_bytes() == before


def test_out_under_a_file_is_a_usage_error_not_a_traceback(tmp_path, release):
    folder = tmp_path / "class"
    honest(folder)
    (tmp_path / "a-file").write_text("x")
    done, _, _ = run_verify(folder, release, out=tmp_path / "a-file" / "verified.csv")
    assert not crashed(done), repr(done.exception)
    assert done.exit_code == 2 and "--out" in done.output


def test_with_a_roster_a_folder_of_no_roster_students_is_said_not_dropped_silently(tmp_path, release):
    folder = tmp_path / "class"
    honest(folder, "alice")
    honest(folder, "bob")
    roster = tmp_path / "roster.csv"
    roster.write_text("username\nalice\n")
    done, lines, said = run_verify(folder, release, "--roster", str(roster))
    assert lines["alice"] == "verified 5/9"
    assert any("bob" in line for line in said), said


@pytest.mark.parametrize("which", ["result.json", "results.json"])
def test_a_folder_named_result_json_costs_no_classmate_their_verdict(tmp_path, release, which):
    folder = tmp_path / "class"
    honest(folder)
    (clone(folder, "mallory") / which).mkdir()
    (folder / f"{PREFIX}mallory" / which / "x").write_text("[]")
    done, lines, _ = run_verify(folder, release)
    assert not crashed(done), repr(done.exception)
    assert lines["alice"] == "verified 5/9" and lines["mallory"].startswith("missing")


# --- attacks refused (beyond tests/release/test_classroom50_attestation.py) --------------------------------------


def _moved(doc):
    doc["tests"][1][attest.FIELD] = doc["tests"][0].pop(attest.FIELD)


def _twice(doc):
    doc["tests"][1][attest.FIELD] = dict(doc["tests"][0][attest.FIELD])


def _extra(doc):
    doc["tests"].append({"test-name": "encoder: bonus", "passed": True, "score": 4, "max-score": 4})
    doc["score"] += 4
    doc["max-score"] += 4


def _reordered(doc):
    doc["tests"][0], doc["tests"][2] = doc["tests"][2], doc["tests"][0]
    doc["tests"][0][attest.FIELD] = doc["tests"][2].pop(attest.FIELD)


def _swap_points(doc):  # the failed 4-point case takes the passed 2-point case's place, names kept
    a, c = doc["tests"][0], doc["tests"][2]
    for k in ("passed", "score", "max-score"):
        a[k], c[k] = c[k], a[k]


MUTATIONS = {
    "score as a float": lambda d: d.update(score=float(d["score"])),
    "score as text": lambda d: d.update(score=str(d["score"])),
    "score as true": lambda d: d["tests"][1].update(score=True),
    "max-score lowered to the score": lambda d: d.update(**{"max-score": d["score"]}),
    "max-score 0": lambda d: d.update(**{"max-score": 0}),
    "a negative test": lambda d: d["tests"][2].update(score=-4),
    "an extra passed test": _extra,
    "a test dropped": lambda d: d["tests"].pop(),
    "tests reordered": _reordered,
    "points swapped between tests": _swap_points,
    "the attestation moved to the second test": _moved,
    "the attestation on two tests": _twice,
    "the attestation a string": lambda d: d["tests"][0].update(attestation="signed"),
    "the signature not base64": lambda d: d["tests"][0][attest.FIELD].update(signature="not base64!"),
    "the signature not ascii": lambda d: d["tests"][0][attest.FIELD].update(signature="é" * 88),
    "the signature cut short": lambda d: d["tests"][0][attest.FIELD].update(
        signature=d["tests"][0][attest.FIELD]["signature"][:40]),
    "another version": lambda d: d["tests"][0][attest.FIELD].update(version="attnlab-attestation/v0"),
    "tests not a list": lambda d: d.update(tests={"0": d["tests"][0]}),
}


@pytest.mark.parametrize("how", MUTATIONS)
def test_every_change_to_a_field_the_signature_covers_is_not_verified(how):
    doc = signed("mallory")
    MUTATIONS[how](doc)
    doc = json.loads(json.dumps(doc))
    v = perpush.judge(doc, tag_of("mallory"), f"{PREFIX}mallory",
                      perpush.Release(CLASSROOM, ASSIGNMENT, BUNDLE, attest.public_key(KEY), "k"))
    assert v.word in ("forged", "unsigned") and v.cell.isprintable(), v


def test_json_text_tricks_in_the_posted_file_are_forged_or_report_the_signed_score(tmp_path, release):
    """Duplicate keys (every JSON reader keeps the last), NaN, a test name in another Unicode normal form."""
    folder = tmp_path / "class"
    base = signed("carol")
    text = json.dumps(base)
    # a higher score before the signed one: the signed value, the last, is what verify reads and reports
    assert '"score": 5,' in text
    clone(folder, "carol", raw=text.replace('"score": 5,', '"score": 9, "score": 5,', 1))
    mallory = json.dumps(signed("mallory"))  # the signed one first, a higher one after it
    clone(folder, "mallory", raw=mallory.replace('"score": 5,', '"score": 5, "score": 9,', 1))
    clone(folder, "trudy", raw=json.dumps(signed("trudy")).replace('"score": 5,', '"score": NaN,', 1))
    doc = signed("erin")
    name = doc["tests"][1]["test-name"]
    named = json.loads(json.dumps(doc).replace(name, name + " caf\u00e9"))  # a name the autograder could have written
    signed_named = attest.sign({**named, "tests": [{k: v for k, v in t.items() if k != attest.FIELD}
                                                   for t in named["tests"]]}, KEY,
                               repository=env_of("erin")["GITHUB_REPOSITORY"], commit=sha_of("erin"), bundle=BUNDLE)
    keys = perpush.Release(CLASSROOM, ASSIGNMENT, BUNDLE, attest.public_key(KEY), "k")
    assert perpush.judge(signed_named, tag_of("erin"), f"{PREFIX}erin", keys).verified  # as signed, it holds
    nfd = json.loads(json.dumps(signed_named))
    nfd["tests"][1]["test-name"] = unicodedata.normalize("NFD", nfd["tests"][1]["test-name"])
    clone(folder, "erin", raw=json.dumps(nfd, ensure_ascii=False))
    done, lines, _ = run_verify(folder, release)
    assert not crashed(done)
    assert lines["carol"] == "verified 5/9"
    assert lines["mallory"].startswith("forged") and lines["trudy"].startswith("forged")
    assert lines["erin"].startswith("forged")
    with open(tmp_path / "verified.csv", encoding="utf-8") as f:
        rows = {r["username"]: r for r in csv.DictReader(f)}
    assert rows["carol"]["score"] == "5" and rows["mallory"]["score"] == rows["trudy"]["score"] == ""


def test_a_signature_for_another_assignment_with_the_same_autograder_digest_is_replayed(tmp_path, release):
    # two assignments released from one lab build folders with the same files, so the same digest
    folder = tmp_path / "class"
    clone(folder, "mallory", [(tag_of("mallory"), signed("mallory", [(9, True)], assignment="attention-lab-makeup"))])
    done, lines, _ = run_verify(folder, release)
    assert lines["mallory"].startswith("replayed: made for the assignment attention-lab-makeup")


def test_a_repository_named_in_other_letter_case_is_the_same_repository(tmp_path, release):
    """GitHub's names are case-blind: Org/FALL26-...-Alice is alice's repository, and its score is unchanged."""
    folder = tmp_path / "class"
    clone(folder, "alice", [(tag_of("alice"), signed("alice", repository=f"Org/{PREFIX.upper()}Alice"))])
    clone(folder, "bob", [(tag_of("bob"), signed("alice"))], name=f"{PREFIX}Bob")  # alice's, in bob's folder
    done, lines, _ = run_verify(folder, release)
    assert lines["alice"] == "verified 5/9" and lines["Bob"].startswith("replayed: made for the repository")


def test_a_newer_release_tag_over_an_older_pushs_result_and_a_tag_of_another_commit_are_replayed(tmp_path, release):
    folder = tmp_path / "class"
    old = signed("mallory", [(9, True)], push=1)
    # the student recreates a release under a tag of the newest commit, its result the older push's
    clone(folder, "mallory", [(f"submit/2026-12-02T10-00-00Z-{sha_of('mallory', 2)[:7]}", old)])
    # the tag's own text kept but for its sha: the submission then is not the tag
    clone(folder, "trudy", [(tag_of("trudy")[:-7] + sha_of("trudy", 2)[:7], signed("trudy", [(9, True)]))])
    done, lines, _ = run_verify(folder, release)
    assert lines["mallory"].startswith("replayed") and lines["trudy"].startswith("replayed")


def test_one_students_malformed_files_cost_no_classmate_their_verdict(tmp_path, release):
    folder = tmp_path / "class"
    honest(folder)
    clone(folder, "bom", raw="\ufeff" + json.dumps(signed("bom")))
    clone(folder, "latin", raw="")
    (folder / f"{PREFIX}latin" / "result.json").write_bytes(b'{"score": "\xff\xfe"}')
    clone(folder, "deep", raw="[" * 200_000 + "]" * 200_000)
    clone(folder, "big", raw="")
    (folder / f"{PREFIX}big" / "result.json").write_bytes(b" " * (perpush.MAX_BYTES + 1))
    clone(folder, "text", raw=json.dumps(json.dumps(signed("text"))))  # the result as a JSON string
    hist = clone(folder, "junk")
    (hist / "results.json").write_text(json.dumps([1, None, {"submission_tag": 7, "result": [1]}, "x"]))
    bigint = clone(folder, "bigint", raw='{"score": ' + "9" * 5000 + "}")
    assert bigint.is_dir()
    os.symlink(folder / f"{PREFIX}alice", folder / f"{PREFIX}linked")  # alice's folder again, under another name
    done, lines, _ = run_verify(folder, release)
    assert not crashed(done), repr(done.exception)
    assert done.exit_code == 1 and lines["alice"] == "verified 5/9"
    assert lines["linked"].startswith("missing") and lines["big"].startswith("missing")
    for name in ("bom", "latin", "deep", "text", "junk", "bigint"):
        assert lines[name].startswith(("unsigned", "missing")), (name, lines[name])
    with open(tmp_path / "verified.csv", encoding="utf-8") as f:
        rows = {r["username"]: r for r in csv.DictReader(f)}
    assert [n for n, r in rows.items() if r["score"]] == ["alice"]


def test_a_download_folder_whose_name_is_not_utf8_gets_a_verdict_and_no_other_students_score(tmp_path, release):
    folder = tmp_path / "class"
    honest(folder)
    odd = os.fsencode(folder) + b"/" + PREFIX.encode() + b"\xff\xfe"
    os.makedirs(odd + b"/exercises")
    with open(odd + b"/result.json", "w") as f:
        json.dump(copy.deepcopy(signed("alice")), f)  # alice's result in it
    done, lines, said = run_verify(folder, release)
    assert not crashed(done), repr(done.exception)
    assert lines["alice"] == "verified 5/9"
    assert sum(line.endswith("verified 5/9") for line in said) == 1
