"""Signed per-push Classroom 50 results and `grade batch verify`: each way a student could post a score the
autograder never gave is caught with its own word, and an honest class verifies, without grading anything.

Most results here are made-up reports signed by grader.runner.attest as the autograder signs them; one goes through
the real path (the release's own workflow_steps.py with the runner's environment), and the last is a real graded run."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grader import ROOT
from grader.cli import cli
from grader.runner import attest, classroom50_result
from grader.runner.report import as_dict
from grader.runner.results import CaseResult, PieceRun
from grader.verbs import classroom50 as release_verb

CLASSROOM, ASSIGNMENT = "fall26", "attention-lab"
PREFIX = f"{CLASSROOM}-{ASSIGNMENT}-"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> dict:
    """A real `grade release classroom50` (its attestation.json and autograder folder) and its seal key's file."""
    base = tmp_path_factory.mktemp("attest")
    key = Fernet.generate_key()
    paths = release_verb.build(base / "out", classroom=CLASSROOM, assignment=ASSIGNMENT,
                               runs_on=("self-hosted", "attnlab"), key=key)
    (base / "seal-key").write_bytes(key + b"\n")  # as it lies on the runner: a line of text
    return {"key": key, "key_file": base / "seal-key", "out": base / "out", **paths,
            "bundle_digest": json.loads(paths["attestation"].read_text())["bundle"]}


def runs(points: list[tuple[int, bool]]) -> list[PieceRun]:
    return [PieceRun("encoder", [CaseResult(f"test_case_{i}", p, ok, "" if ok else "off by about 1e-3")
                                 for i, (p, ok) in enumerate(points)])]


def sha_of(user: str, push: int = 1) -> str:
    return hashlib.sha1(f"{user} {push}".encode()).hexdigest()


def tag_of(user: str, push: int = 1) -> str:
    return f"submit/2026-12-0{push}T10-00-00Z-{sha_of(user, push)[:7]}"


def runner_env(user: str, push: int = 1, classroom: str = CLASSROOM) -> dict[str, str]:
    """What Classroom 50's runner hands the autograder for this student's push (`classroom`: the one their
    .classroom50.yaml names, which is theirs to edit)."""
    repo = f"org/{PREFIX}{user}"
    sha, tag = sha_of(user, push), tag_of(user, push)
    return {"CLASSROOM": classroom, "ASSIGNMENT": ASSIGNMENT, "SUBMISSION_TAG": tag, "OWNER": user, "USERNAME": user,
            "ASSIGNMENT_TYPE": "individual", "MODE": "individual", "GITHUB_REPOSITORY": repo, "GITHUB_SHA": sha,
            "COMMIT_URL": f"https://github.com/{repo}/commit/{sha}",
            "RELEASE_URL": f"https://github.com/{repo}/releases/tag/{tag.replace('/', '%2F')}"}


def signed(keyed: dict, user: str, points: list[tuple[int, bool]], push: int = 1, *, classroom: str = CLASSROOM,
           bundle: str | None = None, key: bytes | None = None) -> dict:
    """The result the keyed autograder writes for this push, signed as it signs it."""
    env = runner_env(user, push, classroom)
    doc = classroom50_result.result(runs(points), environ=env)
    return attest.sign(doc, key or keyed["key"], repository=env["GITHUB_REPOSITORY"], commit=env["GITHUB_SHA"],
                       bundle=bundle or keyed["bundle_digest"])


def as_posted(doc: dict, user: str) -> dict:
    """What Classroom 50's runner posts: the document rewritten (runner.py's finalize_result) and re-serialised."""
    doc = json.loads(json.dumps(doc))
    doc.update(owner=user, assignment_type="individual", datetime="2026-12-01T09:58:00Z",
               graded_at="2026-12-01T10:01:00Z", submitted_by={"username": user, "id": 7})
    return json.loads(json.dumps(doc, indent=2) + "\n")


def download(folder: Path, pushes: dict[str, list[tuple[str, dict | None]]]) -> Path:
    """A folder as `gh teacher download` writes it: per student their clone with results.json (each release's tag
    and result, newest first) and result.json (the newest result), and the posted scores at the root."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scores.csv").write_text("username,score\n")
    for user, history in pushes.items():
        repo = folder / f"{PREFIX}{user}"
        (repo / "exercises").mkdir(parents=True)
        (repo / "exercises" / "encoder.py").write_text("# the student's code\n")
        if history:
            (repo / "results.json").write_text(json.dumps([{"submission_tag": t, "result": d} for t, d in history]))
            newest = next(d for _, d in history if d is not None)
            (repo / "result.json").write_text(json.dumps(newest, indent=2))
    return folder


def verify(folder: Path, keyed: dict, *extra: str) -> tuple[int, dict[str, str], str]:
    """`grade batch verify`: its exit code, each student's line, and its whole output."""
    out = folder.parent / f"{folder.name}-verified.csv"
    done = CliRunner().invoke(cli, ["batch", "verify", str(folder), "--release", str(keyed["out"]), "--out", str(out),
                                    *extra])
    lines = dict(line.split(": ", 1) for line in done.output.splitlines() if ": " in line and "student(s)" not in line)
    return done.exit_code, lines, done.output


def honest(keyed: dict, user: str, points=((2, True), (3, True), (4, False))) -> list[tuple[str, dict]]:
    return [(tag_of(user), as_posted(signed(keyed, user, list(points)), user))]


def test_an_honest_class_verifies_and_its_scores_csv_holds_every_score(keyed, tmp_path):
    folder = download(tmp_path / "class", {"alice": honest(keyed, "alice"), "bob": honest(keyed, "bob", ((9, True),))})
    code, lines, output = verify(folder, keyed)
    assert code == 0, output
    assert lines == {"alice": "verified 5/9", "bob": "verified 9/9"}
    with open(tmp_path / "class-verified.csv", encoding="utf-8") as f:
        rows = {r["username"]: r for r in csv.DictReader(f)}
    assert (rows["alice"]["score"], rows["alice"]["max_score"], rows["bob"]["score"]) == ("5", "9", "9")
    assert rows["alice"]["submission_tag"] == tag_of("alice") and rows["alice"]["datetime"] == "2026-12-01T10:00:00Z"
    assert (folder / "scores.csv").read_text() == "username,score\n"  # the download's own is left as it was


def test_a_result_forged_by_hand_with_a_key_of_the_students_own_is_forged(keyed, tmp_path):
    own_key = Fernet.generate_key()  # the student signs a 9/9 of their own making
    forged = as_posted(signed(keyed, "mallory", [(9, True)], key=own_key), "mallory")
    code, lines, _ = verify(download(tmp_path / "c", {"mallory": [(tag_of("mallory"), forged)]}), keyed)
    assert code == 1 and lines["mallory"].startswith("forged: the signature does not match the document")
    assert "names another key" in lines["mallory"]


def test_a_classmates_signed_result_copied_in_is_replayed(keyed, tmp_path):
    theirs = honest(keyed, "alice", ((9, True),))[0][1]
    code, lines, _ = verify(download(tmp_path / "c", {"alice": honest(keyed, "alice"),
                                                      "mallory": [(tag_of("mallory"), theirs)]}), keyed)
    assert code == 1 and lines["alice"] == "verified 5/9"
    assert lines["mallory"].startswith(f"replayed: made for the repository org/{PREFIX}alice")


def test_an_older_pushs_result_put_on_the_newest_release_is_replayed(keyed, tmp_path):
    old = as_posted(signed(keyed, "mallory", [(9, True)], push=1), "mallory")  # before the edit that broke it
    history = [(tag_of("mallory", 2), old), (tag_of("mallory", 1), old)]
    code, lines, _ = verify(download(tmp_path / "c", {"mallory": history}), keyed)
    assert code == 1 and lines["mallory"].startswith(f"replayed: made for the submission {tag_of('mallory', 1)}")


def test_another_classrooms_autograder_run_with_the_same_key_is_replayed(keyed, tmp_path):
    # last term's folder, published beside this one and graded on the same runner with the same key: a student who
    # names it in their .classroom50.yaml has their repository graded by it
    other = tmp_path / "spring27"
    shutil.copytree(keyed["bundle"], other)
    (other / "autograder.py").write_text((other / "autograder.py").read_text() + "# spring27\n")
    theirs = signed(keyed, "mallory", [(9, True)], classroom="spring27", bundle=attest.bundle_digest(other))
    same_names = signed(keyed, "trudy", [(9, True)], bundle=attest.bundle_digest(other))
    code, lines, _ = verify(download(tmp_path / "c", {"mallory": [(tag_of("mallory"), as_posted(theirs, "mallory"))],
                                                      "trudy": [(tag_of("trudy"), as_posted(same_names, "trudy"))]}),
                            keyed)
    assert code == 1 and lines["mallory"].startswith("replayed: made for the classroom spring27, not fall26")
    assert lines["trudy"].startswith("replayed: graded by another autograder folder")


def test_a_stripped_signature_is_unsigned_and_an_edited_score_is_forged(keyed, tmp_path):
    stripped = as_posted(signed(keyed, "mallory", [(9, False)]), "mallory")
    del stripped["tests"][0][attest.FIELD]
    edited = as_posted(signed(keyed, "trudy", [(2, True), (7, False)]), "trudy")
    edited["tests"][1].update(passed=True, score=7)
    edited["score"] = 9
    hosted = classroom50_result.result(runs([(1, True)]), public=True, environ=runner_env("carol"))
    code, lines, _ = verify(download(tmp_path / "c", {"mallory": [(tag_of("mallory"), stripped)],
                                                      "trudy": [(tag_of("trudy"), edited)],
                                                      "carol": [(tag_of("carol"), as_posted(hosted, "carol"))]}), keyed)
    assert code == 1 and lines["mallory"].startswith("unsigned: no signature")
    assert lines["trudy"].startswith("forged: the signature does not match the document")
    assert lines["carol"] == "unsigned: the public smoke checks of a runner without the key: not a grade"
    assert classroom50_result.problems(edited, runner_env("trudy")) == []  # the contract alone lets the edit through


def test_a_student_without_a_result_a_linked_result_and_a_changed_commit_link_are_named(keyed, tmp_path):
    moved = as_posted(signed(keyed, "trudy", [(9, True)]), "trudy")
    moved["commit"] = f"https://github.com/org/{PREFIX}trudy/commit/{'f' * 40}"
    folder = download(tmp_path / "c", {"dave": [], "trudy": [(tag_of("trudy"), moved)], "erin": []})
    (tmp_path / "elsewhere.json").write_text(json.dumps(honest(keyed, "erin")[0][1]))
    (folder / f"{PREFIX}erin" / "result.json").symlink_to(tmp_path / "elsewhere.json")
    code, lines, _ = verify(folder, keyed)
    assert code == 1 and lines["dave"].startswith("missing: no result.json or results.json")
    assert lines["erin"].startswith("missing: result.json is a symbolic link")
    assert lines["trudy"].startswith("forged: its commit link")


def test_with_a_roster_a_student_without_a_repository_is_missing_and_the_rest_in_its_order(keyed, tmp_path):
    folder = download(tmp_path / "c", {"bob": honest(keyed, "bob"), "alice": honest(keyed, "alice")})
    (tmp_path / "roster.csv").write_text("username,first_name,last_name,email,section,github_id,role\n"
                                         "bob,Bob,B,,A,,student\nzed,Zed,Z,,A,,student\nalice,Alice,A,,A,,student\n")
    code, lines, _ = verify(folder, keyed, "--roster", str(tmp_path / "roster.csv"))
    assert code == 1 and lines["bob"] == lines["alice"] == "verified 5/9"
    assert lines["zed"].startswith("missing: no repository")
    with open(tmp_path / "c-verified.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["username"], r["first_name"], r["score"]) for r in rows] == [("bob", "Bob", "5"), ("zed", "Zed", ""),
                                                                            ("alice", "Alice", "5")]


def test_what_the_user_gives_wrong_is_said_in_one_line(keyed, tmp_path):
    folder = download(tmp_path / "c", {"alice": honest(keyed, "alice")})
    for args, said in ((["--release", str(tmp_path)], "attestation.json"),
                       (["--release", str(keyed["out"]), "--out", str(folder / "scores.csv")], "the download's own")):
        done = CliRunner().invoke(cli, ["batch", "verify", str(folder), *args])
        assert done.exit_code == 2 and said in done.output and "Traceback" not in done.output, done.output
    empty = tmp_path / "empty"
    empty.mkdir()
    done = CliRunner().invoke(cli, ["batch", "verify", str(empty), "--release", str(keyed["out"]), "--out",
                                    str(tmp_path / "v.csv")])
    assert done.exit_code == 2 and "holds no student's folder" in done.output


def test_the_release_writes_the_public_key_and_the_folders_digest_and_no_secret(keyed):
    data = json.loads(keyed["attestation"].read_text())
    assert (data["classroom"], data["assignment"]) == (CLASSROOM, ASSIGNMENT)
    assert data["bundle"] == attest.bundle_digest(keyed["bundle"]) and data["public-key"] == attest.public_key(keyed["key"])
    seed = attest.signing_key(keyed["key"]).private_bytes_raw()
    text = keyed["attestation"].read_bytes()
    assert keyed["key"] not in text and seed.hex().encode() not in text and len(data["public-key"]) == 44
    assert attest.signing_key(Fernet.generate_key()).private_bytes_raw() != seed  # --new-key rotates it too


def test_the_autograders_own_workflow_step_signs_a_result_verify_accepts(keyed, tmp_path):
    """The real path: the release's lab/grader/workflow.py, run as autograder.py runs it after `grade`, with the
    runner's environment, the key file and the autograder folder; then the runner's rewrite and the download."""
    report = tmp_path / "report.json"
    report.write_text(json.dumps(as_dict(runs([(2, True), (3, False)]))))
    (tmp_path / "scratch").mkdir()
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", **runner_env("alice")}
    step = [sys.executable, "-I", str(keyed["bundle"] / "lab" / "grader" / "workflow.py"), "classroom50", str(report),
            str(tmp_path / "scratch"), "signed", str(keyed["key_file"]), str(keyed["bundle"])]
    done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((tmp_path / "scratch" / "result.json").read_text())
    assert classroom50_result.problems(doc, env) == [] and doc["tests"][0][attest.FIELD]["commit"] == sha_of("alice")
    posted = as_posted(doc, "alice")
    assert classroom50_result.problems(posted, env) == []
    code, lines, output = verify(download(tmp_path / "c", {"alice": [(tag_of("alice"), posted)]}), keyed)
    assert code == 0 and lines == {"alice": "verified 2/5"}, output
    del env["GITHUB_SHA"]
    (tmp_path / "scratch" / "result.json").unlink()
    done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "GITHUB_SHA" in done.stdout and not (tmp_path / "scratch" / "result.json").exists()


def test_a_class_of_a_thousand_verifies_in_seconds(keyed, tmp_path):
    pushes = {f"s{i:04d}": [(tag_of(f"s{i:04d}"), as_posted(signed(keyed, f"s{i:04d}", [(2, True), (3, i % 2 == 0)]
                                                                    * 12), f"s{i:04d}"))] for i in range(1000)}
    folder = download(tmp_path / "c", pushes)
    start = time.monotonic()
    code, lines, output = verify(folder, keyed)
    took = time.monotonic() - start
    assert code == 0 and len(lines) == 1000 and set(lines.values()) == {"verified 60/60", "verified 24/60"}, output[-500:]
    print(f"grade batch verify: 1000 students in {took:.2f} s")
    assert took < 30


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="Classroom 50 grades on Linux runners")
def test_a_real_keyed_run_of_the_autograder_verifies_and_its_result_edited_does_not(tmp_path):
    """autograder.py graded for real as the runner runs it (tests/release/classroom50_runner.py): the folder's digest
    on the runner, after the run wrote its caches there, is still the one the release wrote."""
    from release.classroom50_runner import OWNER, SOLVED, autograde, checkout, make_lab

    lab = make_lab(tmp_path / "lab")
    sha, tag = "abc1234" * 5, "submit/2026-12-02T10-00-00Z-abc1234"  # the harness's GITHUB_SHA and SUBMISSION_TAG
    done, doc = autograde(lab, checkout(lab, "signed", SOLVED),
                          COMMIT_URL=f"https://github.com/org/{PREFIX}{OWNER}/commit/{sha}")  # as runner.py makes it
    assert done.returncode == 0 and doc is not None, done.stdout[-3000:] + done.stderr[-3000:]
    keyed = {"out": lab["template"].parent}
    code, lines, output = verify(download(tmp_path / "class", {OWNER: [(tag, as_posted(doc, OWNER))]}), keyed)
    assert code == 0 and lines == {OWNER: f"verified {doc['score']}/{doc['max-score']}"}, output
    doc["tests"][-1].update(passed=False, score=0)  # a lower score for a rival is as forged as a higher one
    doc["score"] -= doc["tests"][-1]["max-score"]
    code, lines, _ = verify(download(tmp_path / "again", {OWNER: [(tag, as_posted(doc, OWNER))]}), keyed)
    assert code == 1 and lines[OWNER].startswith("forged")


@pytest.mark.slow  # it grades the two students (quick)
def test_grade_batch_over_a_download_puts_each_verdict_beside_the_regrades_score(keyed, tmp_path):
    copied = honest(keyed, "alice", ((9, True),))[0][1]
    folder = download(tmp_path / "c", {"alice": honest(keyed, "alice"), "mallory": [(tag_of("mallory"), copied)]})
    for user in ("alice", "mallory"):  # the clone's stubs: graded 0 by the regrade, whatever the push posted
        shutil.copytree(ROOT / "exercises", folder / f"{PREFIX}{user}" / "exercises", dirs_exist_ok=True)
    out = tmp_path / "grades.csv"
    done = CliRunner().invoke(cli, ["batch", str(folder), "--quick", "-j", "2", "--out", str(out), "--verify",
                                    str(keyed["out"])])
    assert done.exit_code == 0, done.output
    with open(out, encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = {r["student"]: r for r in reader}
    assert reader.fieldnames.index("per_push") == reader.fieldnames.index("max_score") + 1
    assert rows[f"{PREFIX}alice"]["per_push"] == "verified 5/9" and rows[f"{PREFIX}alice"]["total"] == "0"
    assert rows[f"{PREFIX}mallory"]["per_push"].startswith("replayed: made for the repository")
    done = CliRunner().invoke(cli, ["batch", str(folder), "--quick", "--out", str(out), "--verify", str(tmp_path)])
    assert done.exit_code == 2 and "attestation.json" in done.output and "Traceback" not in done.output
