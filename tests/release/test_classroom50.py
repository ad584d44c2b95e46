"""`grade release classroom50` and the result document Classroom 50's runner reads, without grading anything."""
from __future__ import annotations

import datetime
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import REFERENCE, ROOT, lab
from grader.cli import cli
from grader.runner import classroom50_result
from grader.runner.results import CaseResult, PieceRun
from grader.verbs import classroom50 as verb
from grader.release import build as release

ENV = {"CLASSROOM": "fall26", "ASSIGNMENT": "attention-lab", "SUBMISSION_TAG": "submit/2026-12-02T10-00-00Z-abc1234",
       "OWNER": "Alice", "USERNAME": "Alice", "ASSIGNMENT_TYPE": "individual",
       "COMMIT_URL": "https://github.com/org/fall26-attention-lab-alice/commit/abc1234",
       "RELEASE_URL": "https://github.com/org/fall26-attention-lab-alice/releases/tag/submit%2Fx"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("c50") / "out"
    return verb.build(out, classroom="fall26", assignment="attention-lab", runs_on=("self-hosted", "attnlab"),
                      key=b"x" * 43 + b"=")


def secrets() -> dict[str, str]:
    """A line of each answer (the reference's solution blocks, the answering lab code) and of each hidden case file."""
    lines = {}
    for path in REFERENCE.glob("[!_]*.py"):
        block = path.read_text().split("### BEGIN SOLUTION")[1:]
        lines.update({f"reference/{path.name}": max((line.strip() for b in block
                                                      for line in b.split("### END SOLUTION")[0].splitlines()), key=len)})
    hidden = [ROOT / "grader" / "lab" / f"{name}.py" for name in lab.SEALED] + [*(ROOT / "grader" / "cases").glob("test_*.py")]
    for path in hidden:  # their longest line of code (the cases' names and points are public: grader/cases/manifest.json)
        code = [line.strip() for line in path.read_text().splitlines() if not line.strip().startswith(("#", '"'))]
        lines[path.relative_to(ROOT).as_posix()] = max(code, key=len)
    return lines


def test_the_template_holds_no_workflow_and_no_sealed_bundle(built):
    template = built["template"]
    assert not (template / ".github").exists()  # Classroom 50 writes .github/workflows/autograde.yaml on accept
    assert not (template / "grader" / "sealed.bin").exists()
    assert sorted(p.name for p in (template / "exercises").glob("*.py")) == sorted(p.name for p in REFERENCE.glob("*.py"))


def test_the_autograder_folder_holds_the_autograder_and_its_own_sealed_grader(built):
    bundle = built["bundle"]
    assert bundle.relative_to(bundle.parents[3]).as_posix() == "config/fall26/autograders/attention-lab"
    assert (bundle / "autograder.py").is_file() and (bundle / "lab" / "grader" / "boot.py").is_file()
    assert (bundle / "lab" / "grader" / "sealed.bin").stat().st_size > 10_000
    script = (bundle / "autograder.py").read_text()
    assert "@TORCH" not in script and release.TORCH in script and release.TORCH_INDEX in script


def test_no_answer_and_no_hidden_case_is_readable_in_anything_it_writes(built):
    out = built["template"].parent
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:  # as Classroom 50's Pages workflow publishes the folder
        tar.add(built["bundle"], arcname="attention-lab")
    texts = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    with tarfile.open(fileobj=io.BytesIO(packed.getvalue())) as tar:
        texts += [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    found = [(where, line) for where, line in secrets().items() if any(line.encode() in t for t in texts)]
    assert len(secrets()) > 12 and found == []


def test_the_autograder_folder_packs_under_the_runners_download_limit(built):
    assert 100_000 < verb.packed_size(built["bundle"]) < verb.BUNDLE_LIMIT


def test_the_runtime_is_the_key_holding_runner_or_a_hosted_python_the_lab_supports(built):
    assert json.loads(built["runtime"].read_text()) == {"runtime": {"runs-on": ["self-hosted", "attnlab"]}}
    hosted = verb.runtime(())
    assert hosted["runs-on"] == "ubuntu-latest" and hosted["python"] in ("3.10", "3.11", "3.12", "3.13")
    setup = built["setup"].read_text()
    assert "/etc/attnlab/seal-key" in setup and "fall26/autograders/attention-lab" in setup and not re.search(r"\{[a-z_]+\}", setup)


@pytest.mark.parametrize("args, said", [
    (["--classroom", "Fall 26", "--assignment", "lab"], "is not a Classroom 50 name"),
    (["--classroom", "fall26", "--assignment", "lab", "--runs-on", "self hosted"], "--runs-on takes"),
])
def test_a_name_classroom50_would_refuse_is_refused_in_one_line(tmp_path, args, said):
    done = CliRunner().invoke(cli, ["release", "classroom50", str(tmp_path / "out"), *args])
    assert done.exit_code == 2 and said in done.output and "Traceback" not in done.output
    assert not (tmp_path / "out").exists()


def test_the_key_is_kept_beside_the_output_for_its_owner_and_reused_by_the_next_release(tmp_path):
    first = CliRunner().invoke(cli, ["release", "classroom50", str(tmp_path / "a"), "--classroom", "fall26",
                                     "--assignment", "attention-lab"], env={"ATTNLAB_SEAL_KEY": ""})
    assert first.exit_code == 0, first.output
    key = tmp_path / "a.seal-key"
    assert key.stat().st_mode & 0o777 == 0o600 and "(new)" in first.output
    again = CliRunner().invoke(cli, ["release", "classroom50", str(tmp_path / "b"), "--classroom", "fall26",
                                     "--assignment", "attention-lab", "--seal-key-file", str(key)])
    assert again.exit_code == 0 and "(file)" in again.output, again.output


def run(name: str, points: list[tuple[int, bool]]) -> PieceRun:
    return PieceRun(name, [CaseResult(f"test_case_{i}", p, ok, "" if ok else "write <b>[it](x)</b>")
                           for i, (p, ok) in enumerate(points)])


def test_the_result_document_keeps_every_rule_of_the_contract():
    doc = classroom50_result.result([run("encoder", [(2, True), (3, False), (0, False)]), run("context", [(9, True)])],
                             environ=ENV, now=datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.timezone.utc))
    assert classroom50_result.problems(doc, ENV) == []
    assert (doc["score"], doc["max-score"], len(doc["tests"])) == (11, 14, 3)  # the point-free case is no test
    assert doc["owner"] == "Alice" and doc["datetime"] == "2026-12-02T10:00:00Z" and doc["review"] == ENV["COMMIT_URL"]
    failed = doc["tests"][1]
    assert failed["passed"] is False and failed["score"] == 0 and failed["max-score"] == 3 and failed["hint"]


def test_a_keyed_run_posts_the_score_and_a_status_the_runner_derives_from_it():
    doc = classroom50_result.result([run("encoder", [(2, True)]), run("context", [(9, True)])], environ=ENV)
    assert (doc["score"], doc["max-score"]) == (11, 11) and classroom50_result.status(doc, public=False) is None
    assert classroom50_result.posted_status(doc) == "success"


def test_the_public_checks_alone_post_neither_a_success_nor_a_score_and_say_not_graded(tmp_path, monkeypatch):
    """A hosted runner holds no key: its result must not enter Classroom 50's gradebook as a full score."""
    from grader.runner import manifest, workflow_steps
    from grader.runner.summary import as_dict

    report = tmp_path / "report.json"
    report.write_text(json.dumps(as_dict([run("encoder", [(1, True)]), run("context", [(2, True)])])))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    outputs = tmp_path / "github-output"
    outputs.write_text("")
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    assert workflow_steps.classroom50_files(report, tmp_path, public=True) == 0
    doc = json.loads((tmp_path / "result.json").read_text())
    assert classroom50_result.problems(doc, ENV) == []
    real_maximum = sum(c["points"] for cases in manifest.read().values() for c in cases if c["points"] > 0)
    assert (doc["score"], doc["max-score"]) == (0, real_maximum)
    assert classroom50_result.posted_status(doc, outputs.read_text()) == "failure"
    assert classroom50_result.posted_status(doc) == "failure"  # even where the runner ignored the written status
    summary = [line for line in outputs.read_text().splitlines() if line.startswith("summary=")]
    assert len(summary) == 1 and "not graded" in summary[0] and "2 of 2 passed" in summary[0] and len(summary[0]) <= 148
    checks = [t for t in doc["tests"] if t["test-name"] != classroom50_result.NOT_GRADED]
    assert len(checks) == 2 and all(t["passed"] and t["max-score"] == 0 and ": public check: " in t["test-name"]
                                    for t in checks)
    body = (tmp_path / "release-body.md").read_text()
    assert body.startswith("## Attention lab: not graded (public smoke checks: 3/3)") and "this is not the grade" in body


@pytest.mark.parametrize("change, said", [
    (lambda d: d.update(score=99), "above its max-score"),
    (lambda d: d.update(score=10.0), "not a non-negative integer"),
    (lambda d: d["tests"][0].update(score=True), "not a non-negative integer"),
    (lambda d: d.update(owner="mallory"), "owner is 'mallory'"),
    (lambda d: d.update(classroom="other"), "classroom is 'other'"),
    (lambda d: d.update(datetime="2026-12-02 10:00"), "not YYYY-MM-DDTHH:MM:SSZ"),
    (lambda d: d.update(submission="v1"), "does not start with 'submit/'"),
    (lambda d: d.pop("review"), "no 'review'"),
    (lambda d: d.update(extra=1), "unexpected key 'extra'"),
    (lambda d: d["tests"][0].update(score=1), "do not add up"),
])
def test_a_document_that_breaks_the_contract_is_named(change, said):
    doc = classroom50_result.result([run("encoder", [(2, True), (3, False)])], environ=ENV)
    change(doc)
    assert any(said in line for line in classroom50_result.problems(doc, ENV)), classroom50_result.problems(doc, ENV)


def test_the_format_needs_the_runners_environment_and_a_full_run(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    done = CliRunner().invoke(cli, ["--format", "classroom50", "--submission", str(REFERENCE)])
    assert done.exit_code == 2 and "CLASSROOM" in done.output and "Traceback" not in done.output
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    done = CliRunner().invoke(cli, ["--format", "classroom50", "--quick", "--submission", str(REFERENCE)])
    assert done.exit_code == 2 and "--quick cannot go with --format classroom50" in done.output
