"""The class regrade's engines (grader/templates/regrade, written by `grade release regrade OUT`): the GitHub
Actions workflow, the Slurm job array and the Kubernetes Indexed Job each split the class with
`grade batch --shard K/N` and join it with `grade batch merge`.

Each clones the class from a roster (tests/regrade/roster.csv: four students with a repository, and erin, who has
none) with `grade batch collect`. The workflow is linted (GitHub's schema, zizmor), and its step scripts run here
with bash as a runner would run them, on a class of local git repositories served by a stand-in `gh`
(tests/regrade/fakegh/gh) on PATH; the Slurm scripts run through a stand-in `sbatch` (fakegh/sbatch) that runs
each array task at once; the Kubernetes clone Job's and Indexed Job's container commands run here, the latter once
per JOB_COMPLETION_INDEX. The end-to-end runs grade with --quick (the workflow's `quick` input, GRADE_OPTS
elsewhere): the pipeline is the subject, not the training cases.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import REFERENCE, ROOT
from grader.cli import cli
from grader.regrade.shard import assign
from grader.verbs import engines, release

from workflow_lint import ZIZMOR_CONFIG, schema_findings, zizmor_findings

from .github import base_env, commit

yaml = pytest.importorskip("yaml")

TEMPLATES = ROOT / "grader" / "templates" / "regrade"
WORKFLOW = TEMPLATES / "regrade.yml"
STUB = ROOT / "exercises"
ROSTER = Path(__file__).parent / "roster.csv"  # in the grading repository, as the workflow's roster input names it

ORG, PREFIX = "school", "fall26-attention-lab-"
DEADLINE = "2026-12-01T23:59:00-05:00"
ON_TIME, LATE = "2026-11-30T12:00:00-05:00", "2026-12-02T09:00:00-05:00"
SECRETS = {"CLASS_TOKEN": "not-a-real-token", "ATTNLAB_SEED": "class-seed-2026"}

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


# --- the class: a roster of five, four student repositories with dated commits -----------------------------

def lab(source: Path, **swap: Path) -> dict[str, Path]:
    """The lab's six files from `source`, with some pieces' files swapped: {"exercises/x.py": path}."""
    files = {f"exercises/{p.name}": p for p in sorted(source.glob("*.py")) if p.name != "__init__.py"}
    files.update({f"exercises/{piece}.py": path for piece, path in swap.items()})
    return files


@dataclass
class Klass:
    """The class on "GitHub": the roster's students, and their repositories ORG/PREFIX+username in
    `repos`/ORG, as the stand-in gh serves them (and the template repository, school/attention-lab-template)."""
    repos: Path
    students: list[str] = field(default_factory=list)  # with a repository
    missing: list[str] = field(default_factory=list)  # on the roster, without one

    @property
    def roster(self) -> list[str]:
        return [*self.students, *self.missing]

    def fake(self) -> dict[str, str]:
        """The stand-in gh's environment, with a token: what `gh auth login` or GH_TOKEN gives the real one."""
        return {"FAKEGH_REPOS": str(self.repos), "GH_TOKEN": "not-a-real-token"}


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> Klass:
    """alice: the reference, on time. bob: the reference on time, then a stub context after the deadline (the
    deadline keeps his marks). carol: her context still the stub at the deadline, and a file added under
    grader/ (a protected path: the release_files column flags it). dave: nothing but the stubs. erin: on the
    roster, never accepted: no repository. The template repository holds the stubs."""
    repos = tmp_path_factory.mktemp("github")
    k = Klass(repos, ["alice", "bob", "carol", "dave"], ["erin"])
    assert [line.split(",")[0] for line in ROSTER.read_text().splitlines()[1:]] == k.roster + ["prof"]
    home = repos / ORG
    commit(home / f"{PREFIX}alice", ON_TIME, lab(REFERENCE))
    commit(home / f"{PREFIX}bob", ON_TIME, lab(REFERENCE))
    commit(home / f"{PREFIX}bob", LATE, lab(REFERENCE, context=STUB / "context.py"))
    commit(home / f"{PREFIX}carol", ON_TIME, {**lab(REFERENCE, context=STUB / "context.py"),
                                             "grader/extra.py": STUB / "__init__.py"})
    commit(home / f"{PREFIX}dave", ON_TIME, lab(STUB))
    commit(home / "fall26-other-lab-alice", ON_TIME, lab(STUB))  # another assignment's: never cloned
    commit(repos / "school" / "attention-lab-template", "2026-11-01T09:00:00-05:00", lab(STUB))
    return k


def rows(gradebook: Path) -> dict[str, dict]:
    with open(gradebook, newline="", encoding="utf-8") as f:
        found = list(csv.DictReader(f))
    names = [r["student"] for r in found]
    assert len(names) == len(set(names)), f"a student twice: {names}"
    return {r["student"]: r for r in found}


def check_class_gradebook(gradebook: Path, klass: Klass) -> dict[str, dict]:
    """Every roster student once, by username; graded at the deadline (bob's late break not graded), with --quick;
    erin, without a repository, an error row that says which was expected; Classroom 50's scores.csv beside it."""
    book = rows(gradebook)
    assert sorted(book) == sorted(klass.roster)
    alice, bob, carol, dave, erin = (book[s] for s in klass.roster)
    assert int(alice["total"]) == int(alice["max_score"]) > 0
    assert int(bob["total"]) == int(bob["max_score"]), bob  # his commit after the deadline is not graded
    assert int(carol["context"]) == 0 and 0 < int(carol["total"]) < int(carol["max_score"])
    assert int(dave["total"]) == 0
    assert erin["status"] == f"error: no repository (expected {PREFIX}erin)" and erin["total"] == "0"
    assert {r["mode"] for r in book.values()} == {"quick"}
    with open(gradebook.with_name("scores.csv"), newline="", encoding="utf-8") as f:
        scores = list(csv.DictReader(f))
    assert [r["username"] for r in scores] == klass.roster  # the roster's order; prof, a teacher, is none
    assert scores[0]["first_name"] == "Alice" and scores[0]["score"] == alice["total"]
    assert scores[0]["datetime"] == ON_TIME and scores[0]["late"] == "false"  # in the deadline's zone, as given
    assert scores[4]["score"] == "" and scores[4]["email"] == "erin@uni.example"
    return book


def shards_of(klass: Klass, n: int) -> dict[int, list[str]]:
    parts = assign(klass.roster, n)  # the roster is the class list: erin has a shard too
    return {k: sorted(s for s, p in parts.items() if p == k) for k in range(1, n + 1)}


# --- a stand-in for the Actions runner: each step's `run` with bash, its `uses` emulated ------------------

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
INSTALL = re.compile(r"^python -I -m pip install .+$")


@dataclass
class Job:
    result: str
    outputs: dict[str, str]
    steps: dict[str, dict[str, str]]
    log: str
    summary: str


class Runner:
    """Runs regrade.yml's jobs here, one at a time, as GitHub would: each on a fresh RUNNER_TEMP and workspace
    (at the same paths every time), each step's script with GitHub's `bash --noprofile --norc -eo pipefail`,
    its env: expanded from the contexts it names (an unknown one fails the test), its outputs read from
    GITHUB_OUTPUT; artifacts are kept between jobs. The install steps (pip alone) are skipped: this venv is
    the install; a checkout makes the job run in this repository (which has reference/, as the grading
    repository has)."""

    def __init__(self, tmp: Path, inputs: dict, secrets: dict[str, str]) -> None:
        self.tmp, self.inputs, self.secrets = tmp, inputs, secrets
        self.wf = workflow()
        self.artifacts: dict[str, Path] = {}

    def expand(self, text, ctx: dict) -> str:
        if isinstance(text, bool):  # YAML's true in a with: or env: block reaches the action as "true"
            return str(text).lower()

        def one(m: re.Match) -> str:
            value = ctx
            for part in m.group(1).split("."):
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
                    raise AssertionError(f"the stand-in runner evaluates context paths only, not {m.group(1)!r}")
                if part not in value:
                    if value is ctx:
                        raise AssertionError(f"unknown context in {text!r}")
                    value = ""
                    break
                value = value[part]
            return str(value).lower() if isinstance(value, bool) else str(value)

        return EXPR.sub(one, str(text))

    def job(self, name: str, matrix: dict | None = None, needs: dict[str, Job] | None = None,
            extra_env: dict[str, str] | None = None) -> Job:
        spec = self.wf["jobs"][name]
        machine = self.tmp / "runner"  # a fresh machine, at the same paths as every job's (as GitHub's are)
        shutil.rmtree(machine, ignore_errors=True)
        temp, workspace = machine / "temp", machine / "workspace"
        temp.mkdir(parents=True), workspace.mkdir()
        ctx = {"inputs": self.inputs, "secrets": self.secrets, "matrix": matrix or {}, "steps": {},
               "needs": {n: {"result": j.result, "outputs": j.outputs} for n, j in (needs or {}).items()},
               "runner": {"temp": str(temp)}, "github": {"workflow": self.wf["name"], "workspace": str(workspace)}}
        cwd, log, result, summary = workspace, [], "success", temp / "summary.md"
        summary.touch()
        for i, step in enumerate(spec["steps"]):
            assert "if" not in step, "the stand-in runner runs every step in order"
            with_ = {k: self.expand(v, ctx) for k, v in step.get("with", {}).items()}
            if "uses" in step:
                cwd = self.uses(step["uses"], with_, cwd)
                continue
            script = step["run"]
            assert "${{" not in script, f"an expression inside a script: {step.get('name')}"
            if "pip install" in script:
                assert all(INSTALL.match(line) for line in script.strip().splitlines()), \
                    f"an install step that does more than install: {script}"
                continue
            out = temp / f"output-{i}"
            out.touch()
            env = {**base_env(machine / "home"), **(extra_env or {}),
                   **{k: self.expand(v, ctx) for k, v in step.get("env", {}).items()},
                   "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary),
                   "GITHUB_WORKSPACE": str(workspace), "CI": "true", "GITHUB_ACTIONS": "true"}
            (temp / f"step-{i}.sh").write_text(script)
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(temp / f"step-{i}.sh")],
                                  cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
            log.append(f"## {step.get('name')} (exit {done.returncode})\n{done.stdout}{done.stderr}")
            if "id" in step:
                ctx["steps"][step["id"]] = {"outputs": parse_outputs(out.read_text())}
            if done.returncode != 0:
                result = "failure"
                break
        outputs = {k: self.expand(v, ctx) for k, v in spec.get("outputs", {}).items()} if result == "success" else {}
        return Job(result, outputs, ctx["steps"], "\n".join(log), summary.read_text())

    def uses(self, action: str, with_: dict[str, str], cwd: Path) -> Path:
        """checkout: the job now runs in this repository; setup-python: this venv; the artifact actions:
        upload copies a file or folder in (refused where the name exists, unless overwrite), download copies
        one artifact's files into path, or each matching one into path/NAME."""
        name = action.split("@")[0]
        if name == "actions/checkout":
            assert with_.get("persist-credentials") == "false"
            return ROOT
        if name == "actions/setup-python":
            return cwd
        if name == "actions/upload-artifact":
            source, dest = Path(with_["path"]), self.tmp / "artifacts" / with_["name"]
            if not source.exists():
                assert with_.get("if-no-files-found") != "error", f"nothing to upload at {source}"
                return cwd
            if with_["name"] in self.artifacts:
                assert with_.get("overwrite") == "true", f"artifact {with_['name']} uploaded twice"
                shutil.rmtree(dest)
            if source.is_dir():
                shutil.copytree(source, dest)
            else:
                dest.mkdir(parents=True)
                shutil.copyfile(source, dest / source.name)
            self.artifacts[with_["name"]] = dest
            return cwd
        if name == "actions/download-artifact":
            path = Path(with_["path"])
            if "name" in with_:
                shutil.copytree(self.artifacts[with_["name"]], path, dirs_exist_ok=True)
            else:
                for art in sorted(self.artifacts):
                    if re.fullmatch(with_["pattern"].replace("*", ".*"), art):
                        shutil.copytree(self.artifacts[art], path / art)
            return cwd
        raise AssertionError(f"the workflow uses an action the stand-in does not know: {action}")


def parse_outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT's two forms: name=value and name<<DELIMITER ... DELIMITER; a heredoc without its closing
    DELIMITER line is refused (ValueError), as Actions fails the step that wrote it."""
    found, lines = {}, iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delim = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delim:
                    break
                body.append(inner)
            else:
                raise ValueError(f"GITHUB_OUTPUT: {key}<<{delim} has no closing {delim} line")
            found[key] = "\n".join(body)
        elif "=" in line:
            key, value = line.split("=", 1)
            found[key] = value
    return found


def run_step(job: str, step_name: str, env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """One step's script alone, with `env` (its own env: block's names) and a GITHUB_OUTPUT; (run, outputs)."""
    step = next(s for s in workflow()["jobs"][job]["steps"] if s.get("name") == step_name)
    assert set(env) <= set(step.get("env", {})) | {"RUNNER_TEMP"}, "the test gives the step names it does not have"
    out = cwd / "github-output"
    out.write_text("")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                          env={**base_env(cwd / "home"), **env, "GITHUB_OUTPUT": str(out)},
                          capture_output=True, text=True, timeout=120)
    return done, parse_outputs(out.read_text())


# --- the workflow: lint ------------------------------------------------------------------------------------

def test_the_workflow_passes_the_github_workflow_schema():
    assert schema_findings(WORKFLOW) == ""


def test_the_workflow_passes_zizmor_with_only_githubs_own_actions_pinned_by_tag():
    config = yaml.safe_load(ZIZMOR_CONFIG.read_text())
    policies = {"actions/*": "ref-pin", "*": "hash-pin"}
    assert config == {"rules": {"unpinned-uses": {"config": {"policies": policies}}}}, \
        "the zizmor config allows actions/* by tag and suppresses nothing else"
    assert zizmor_findings(WORKFLOW) == ""
    assert {use.split("@")[0].split("/")[0] for use in re.findall(r"uses: (\S+)", WORKFLOW.read_text())} == {"actions"}


def test_no_script_holds_an_expression_and_the_workflow_keeps_its_guards():
    wf = workflow()
    assert wf["permissions"] == {"contents": "read"}
    assert "group" in wf["concurrency"] and wf["concurrency"]["cancel-in-progress"] is False
    assert set(wf["on"]) == {"workflow_dispatch"}
    assert set(wf["on"]["workflow_dispatch"]["inputs"]) >= {"org", "prefix", "roster", "deadline", "shards"}
    for name, job in wf["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), name
        assert "permissions" not in job, f"{name} widens the workflow's permissions"
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), f"{name}: {step.get('name')}: an expression in a script"
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False
    grade = wf["jobs"]["grade"]
    assert grade["strategy"]["fail-fast"] is False
    assert grade["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.clone.outputs.matrix) }}"
    part = next(s for s in grade["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert part["uses"] == "actions/upload-artifact@v7" and part["with"]["overwrite"] is True
    assert part["with"]["name"] == "part-${{ matrix.shard }}"
    merge = wf["jobs"]["merge"]
    assert "!cancelled()" in merge["if"] and "grade" in merge["needs"]
    secrets_used = set(re.findall(r"secrets\.([A-Z_]+)", WORKFLOW.read_text()))
    assert secrets_used == {"CLASS_TOKEN", "ATTNLAB_SEED", "ATTNLAB_SEAL_KEY"}
    # the class token reaches the cloning step only, the grading secrets the grading step only
    for name, job in wf["jobs"].items():
        for step in job["steps"]:
            held = {v.split("secrets.")[1].rstrip(" }") for v in step.get("env", {}).values() if "secrets." in str(v)}
            if held:
                assert held <= ({"CLASS_TOKEN"} if name == "clone" else {"ATTNLAB_SEED", "ATTNLAB_SEAL_KEY"}), \
                    (name, step["name"], held)
                assert name != "clone" or "grade batch collect" in step["run"]


@pytest.mark.parametrize("shards, students, matrix", [
    ("3", "", [1, 2, 3]), ("1", "", [1]), ("20", "", list(range(1, 21))), ("256", "", list(range(1, 257))),
    ("007", "", list(range(1, 8))), ("3", "40", [1, 2, 3]), ("20", "4", [1, 2, 3, 4]),
])
def test_the_matrix_step_turns_the_shards_input_into_the_list_1_to_n(tmp_path, shards, students, matrix):
    done, out = run_step("clone", "Split the class into shards", {"SHARDS": shards, "STUDENTS": students}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(out["matrix"]) == matrix and out["shards"] == str(len(matrix))


@pytest.mark.parametrize("shards", ["0", "abc", "999", "257", "", "-1", "3 ", " 3", "1e2", "2/3", "3;id", "$(id)"])
def test_the_matrix_step_refuses_a_shard_count_that_is_not_1_to_256(tmp_path, shards):
    done, out = run_step("clone", "Split the class into shards", {"SHARDS": shards}, tmp_path)
    assert done.returncode != 0 and "matrix" not in out
    assert "::error title=Bad shards::" in done.stdout


GOOD = {"ORG": ORG, "PREFIX": PREFIX, "ROSTER": "roster.csv", "SHARDS": "20", "DEADLINE": "", "RELEASE": ""}


@pytest.mark.parametrize("inputs, ok", [
    ({}, True),
    ({"DEADLINE": DEADLINE, "RELEASE": "school/attention-lab", "ROSTER": "rosters/fall26.csv"}, True),
    ({"DEADLINE": "2026-12-02T04:59:00Z", "ROSTER": ""}, True),  # no roster: every repository starting with PREFIX
    ({"DEADLINE": "2026-12-01T23:59:00"}, False),  # no zone
    ({"DEADLINE": "tomorrow"}, False),
    ({"ORG": "school; rm -rf ~"}, False),
    ({"ORG": "-school"}, False),
    ({"PREFIX": ""}, False),
    ({"PREFIX": "../x"}, False),
    ({"PREFIX": "a b"}, False),
    ({"ROSTER": "../secrets.csv"}, False),
    ({"ROSTER": "rosters/../../x"}, False),
    ({"ROSTER": "/etc/passwd"}, False),
    ({"ROSTER": "-r.csv"}, False),
    ({"SHARDS": "300"}, False),
    ({"RELEASE": "-o/../x y"}, False),
])
def test_the_inputs_are_checked_before_anything_is_cloned(tmp_path, inputs, ok):
    done, _ = run_step("clone", "Check the inputs", {**GOOD, **inputs}, tmp_path)
    assert (done.returncode == 0) is ok, done.stdout + done.stderr
    assert ok or "::error title=Bad" in done.stdout


def test_the_grading_step_refuses_a_student_release_without_its_seal_key(tmp_path):
    """Where the repository has no reference/ and no key is set, grade would fall back to the public smoke
    checks: the step stops first, saying why, and grades nothing."""
    (tmp_path / "temp" / "class" / "students" / f"{PREFIX}alice").mkdir(parents=True)
    env = {"SHARD": "1", "SHARDS": "2", "PREFIX": PREFIX, "DEADLINE": "", "QUICK": "false", "ATTNLAB_SEED": "",
           "ATTNLAB_SEAL_KEY": "", "RUNNER_TEMP": str(tmp_path / "temp")}
    done, _ = run_step("grade", "Grade this shard", env, tmp_path)  # tmp_path: a checkout without reference/
    assert done.returncode == 1 and "::error title=No grading key::" in done.stdout
    assert not (tmp_path / "temp" / "part").exists()


INPUTS = {"org": ORG, "prefix": PREFIX, "roster": ROSTER.relative_to(ROOT).as_posix(), "deadline": "", "shards": "3",
          "release": "", "quick": True}


@needs_git
def test_a_repository_that_fails_to_clone_fails_the_clone_job_naming_it_and_a_student_without_one_does_not(
        tmp_path, klass):
    """A repository that exists and did not clone fails the job, naming it; erin, who has no repository, is a
    warning (her row in the gradebook says so), never a failure; no token, or no roster: one error line."""
    runner = Runner(tmp_path, INPUTS, SECRETS)
    fake = {"FAKEGH_REPOS": str(klass.repos)}
    job = runner.job("clone", extra_env={**fake, "FAKEGH_FAIL": f"{PREFIX}carol"})
    assert job.result == "failure" and "class" not in runner.artifacts
    assert job.log.count(f"::error title=Not cloned::not cloned: carol ({ORG}/{PREFIX}carol): failed to run git") == 1
    assert f"::warning title=No repository::no repository: erin (expected {ORG}/{PREFIX}erin)" in job.log
    job = Runner(tmp_path / "ok", INPUTS, SECRETS).job("clone", extra_env=fake)
    assert job.result == "success" and "::error" not in job.log, job.log
    assert job.outputs["students"] == "4" and "::warning title=No repository::no repository: erin" in job.log
    no_token = Runner(tmp_path / "again", INPUTS, {**SECRETS, "CLASS_TOKEN": ""})
    job = no_token.job("clone", extra_env=fake)
    assert job.result == "failure" and "::error title=No token::" in job.log
    no_roster = Runner(tmp_path / "none", {**INPUTS, "roster": "no-such-roster.csv"}, SECRETS)
    job = no_roster.job("clone", extra_env=fake)
    assert job.result == "failure" and "::error title=No roster::no-such-roster.csv is not a file" in job.log


@needs_git
def test_a_repository_over_the_clone_cap_is_left_out_of_the_class_artifact_with_a_warning_and_the_rest_go_on(
        tmp_path, klass):
    """Issue 31 §3: one huge repository never makes the class artifact too large for every shard: the clone job
    leaves it out (a placeholder the gradebook's error row names the cap from), warns, and packs the rest."""
    import tarfile

    repos = tmp_path / "github"
    shutil.copytree(klass.repos, repos)
    commit(repos / ORG / f"{PREFIX}carol", ON_TIME, {"big.bin": os.urandom(3 << 20).hex()})
    runner = Runner(tmp_path, INPUTS, SECRETS)
    job = runner.job("clone", extra_env={"FAKEGH_REPOS": str(repos), "ATTNLAB_MAX_REPO_MB": "2"})
    assert job.result == "success" and "::error" not in job.log, job.log
    warned = [line for line in job.log.splitlines() if line.startswith("::warning title=Too large::")]
    assert len(warned) == 1 and f"too large: carol ({ORG}/{PREFIX}carol): not graded: its clone is " in warned[0]
    assert "over the cap of 2 MB a repository" in warned[0]
    assert job.outputs["students"] == "4"  # carol keeps her place in the class: her row says why
    packed = next(runner.artifacts["class"].rglob("class.tar.gz"))
    assert packed.stat().st_size < 1 << 20
    with tarfile.open(packed) as tar:
        names = tar.getnames()
    assert f"./students/{PREFIX}carol/.attnlab-too-large.json" in names
    assert not any(n.startswith(f"./students/{PREFIX}carol/") and "too-large" not in n for n in names)
    assert any(n.startswith(f"./students/{PREFIX}alice/.git/") for n in names)


@pytest.mark.slow
@needs_git
def test_the_workflow_clones_grades_each_shard_and_merges_the_class_and_a_failed_shard_is_rerun(tmp_path, klass):
    inputs = {**INPUTS, "deadline": DEADLINE, "release": "school/attention-lab-template"}
    runner = Runner(tmp_path, inputs, SECRETS)
    fake = {"FAKEGH_REPOS": str(klass.repos), "FAKEGH_LOG": str(tmp_path / "gh.log")}
    clone = runner.job("clone", extra_env=fake)
    assert clone.result == "success", clone.log
    assert clone.outputs == {"matrix": "[1,2,3]", "shards": "3", "students": "4"}
    calls = (tmp_path / "gh.log").read_text().splitlines()
    assert calls[0] == "gh auth status" and calls[-1].startswith("gh repo clone school/attention-lab-template ")
    assert sorted(c.split()[3] for c in calls[1:-1]) == [f"{ORG}/{PREFIX}{u}" for u in klass.roster]
    graded = {}
    for k in json.loads(clone.outputs["matrix"]):
        graded[k] = runner.job("grade", matrix={"shard": k}, needs={"clone": clone})
        assert graded[k].result == "success", graded[k].log
        assert sorted(rows(runner.artifacts[f"part-{k}"] / "grades.csv")) == shards_of(klass, 3)[k]
    assert "::warning title=Quick::" in graded[1].log
    merge = runner.job("merge", needs={"clone": clone, "grade": Job("success", {}, {}, "", "")})
    assert merge.result == "success", merge.log
    book = check_class_gradebook(runner.artifacts["gradebook"] / "grades.csv", klass)
    assert "after the deadline not graded" in book[klass.students[1]]["status"]  # bob's row says so
    flagged = {s for s, r in book.items() if r["release_files"].startswith("CHANGED")}
    assert book["erin"]["release_files"] == "n/a (no repository)"
    assert flagged == {klass.students[2]} and "grader/extra.py" in book[klass.students[2]]["release_files"]
    for suffix in ("-reports", "-manifest.json", "-similarity.html", "-class.html"):
        assert (runner.artifacts["gradebook"] / f"grades{suffix}").exists(), suffix
    assert "students in the gradebook: 5, of whom without a repository: 1" in merge.summary
    assert (runner.artifacts["gradebook"] / "scores.csv").is_file()
    first = (runner.artifacts["gradebook"] / "grades.csv").read_bytes()

    # shard 2's job failed: no part-2; the merge still runs, fails, and names shard 2's students to rerun
    shutil.rmtree(runner.artifacts.pop("part-2"))
    failed = runner.job("merge", needs={"clone": clone, "grade": Job("failure", {}, {}, "", "")})
    assert failed.result == "failure"
    assert "the merge failed" in failed.summary and "grading jobs: failure" in failed.summary
    for student in shards_of(klass, 3)[2]:
        assert student in failed.summary and "::error title=Merge::" in failed.log
    # "Re-run failed jobs": shard 2 again (its upload overwrites), then the merge: the same gradebook
    assert runner.job("grade", matrix={"shard": 2}, needs={"clone": clone}).result == "success"
    again = runner.job("merge", needs={"clone": clone, "grade": Job("success", {}, {}, "", "")})
    assert again.result == "success", again.log
    assert (runner.artifacts["gradebook"] / "grades.csv").read_bytes() == first


# --- Slurm ---------------------------------------------------------------------------------------------------

SLURM = TEMPLATES / "slurm"


def test_the_slurm_scripts_parse_and_agree_on_n_and_two_cores_a_task():
    for script in SLURM.iterdir():
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, (script.name, done.stderr)
        assert script.read_text().startswith("#!/bin/bash\n") and os.access(script, os.X_OK), script.name
    array = (SLURM / "regrade.sbatch").read_text()
    n = re.search(r"^#SBATCH --array=1-(\d+)$", array, re.M)
    assert n and f'SHARDS="${{SHARDS:-{n.group(1)}}}"' in array
    assert re.search(r"^#SBATCH --cpus-per-task=2$", array, re.M)
    assert '--shard "$K/$SHARDS"' in array and 'K="${SLURM_ARRAY_TASK_ID:?' in array
    submit = (SLURM / "submit.sh").read_text()
    assert "sbatch --parsable" in submit and '--dependency="afterany:$array"' in submit
    assert 'grade batch collect "${collect[@]}"' in submit and '--roster "$ROSTER" --prefix "$PREFIX"' in array


@pytest.mark.slow
@needs_git
def test_the_slurm_array_grades_the_class_and_a_failed_task_is_rerun_alone(tmp_path, klass):
    """submit.sh clones the roster's repositories on the login node (ORG set), submits the array and the merge."""
    engines.write(tmp_path / "engines")
    class_dir = tmp_path / "cluster" / "class"
    shutil.copyfile(ROSTER, tmp_path / "roster.csv")
    state = tmp_path / "slurm"
    env = {**base_env(tmp_path / "home"), **klass.fake(), "FAKESBATCH_DIR": str(state),
           "FAKESBATCH_LOG": str(state / "log.jsonl"), "LAB": str(ROOT), "PARTS": str(tmp_path / "parts"),
           "OUT": str(tmp_path / "out"), "DEADLINE": DEADLINE, "GRADE_OPTS": "--quick",
           "ATTNLAB_SEED": SECRETS["ATTNLAB_SEED"], "ORG": ORG, "PREFIX": PREFIX, "ROSTER": "roster.csv"}
    slurm = tmp_path / "engines" / "slurm"

    def sbatch_log() -> list[dict]:
        return [json.loads(line) for line in (state / "log.jsonl").read_text().splitlines()]

    done = subprocess.run([str(slurm / "submit.sh"), str(class_dir), "2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    array, merge = sbatch_log()
    outputs = "".join(p.read_text() for p in sorted(state.glob("*.out")))
    assert array["options"]["--array"] == "1-2" and array["codes"] == {"1": 0, "2": 0}, outputs
    assert merge["options"]["--dependency"] == f"afterany:{array['job']}" and merge["codes"] == {"0": 0}, outputs
    assert f"merge:  job {merge['job']}" in done.stdout
    assert f"no repository: erin (expected {ORG}/{PREFIX}erin)" in done.stdout
    assert sorted(p.name for p in class_dir.iterdir()) == [f"{PREFIX}{u}" for u in klass.students]
    check_class_gradebook(tmp_path / "out" / "grades.csv", klass)
    first = (tmp_path / "out" / "grades.csv").read_bytes()

    # task 2 died: the merge names its students; the rerun submit.sh printed, run as printed from a fresh shell
    # (none of the run's settings in its environment but the exported seed), regrades that shard alone
    lines = done.stdout.splitlines()
    rerun_cmd = lines[lines.index(next(ln for ln in lines if ln.startswith("rerun a failed shard K"))) + 1].strip()
    merge_cmd = lines[lines.index("then merge again:") + 1].strip()
    assert "--array=K " in rerun_cmd and "SHARDS=2 " in rerun_cmd and f"CLASS={class_dir} " in rerun_cmd
    assert SECRETS["ATTNLAB_SEED"] not in done.stdout  # the seed by name only
    fresh = {**base_env(tmp_path / "home"), **klass.fake(), "FAKESBATCH_DIR": str(state),
             "FAKESBATCH_LOG": str(state / "log.jsonl"), "ATTNLAB_SEED": SECRETS["ATTNLAB_SEED"]}
    shutil.rmtree(tmp_path / "parts" / "part-2")
    subprocess.run(["bash", "-c", merge_cmd], cwd=tmp_path, env=fresh, check=True, capture_output=True)
    refused = sbatch_log()[-1]
    said = (state / f"job-{refused['job']}.out").read_text()
    assert refused["codes"] != {"0": 0} and all(s in said for s in shards_of(klass, 2)[2]), said
    subprocess.run(["bash", "-c", rerun_cmd.replace("--array=K ", "--array=2 ")], cwd=tmp_path, env=fresh,
                   check=True, capture_output=True)
    rerun = sbatch_log()[-1]
    assert rerun["codes"] == {"2": 0}, (state / f"job-{rerun['job']}_2.out").read_text()
    subprocess.run(["bash", "-c", merge_cmd], cwd=tmp_path, env=fresh, check=True, capture_output=True)
    assert sbatch_log()[-1]["codes"] == {"0": 0}, (state / f"job-{sbatch_log()[-1]['job']}.out").read_text()
    assert (tmp_path / "out" / "grades.csv").read_bytes() == first


def test_a_slurm_task_outside_1_to_shards_is_refused_before_grading(tmp_path):
    env = {**base_env(tmp_path / "home"), "CLASS": str(tmp_path), "SHARDS": "2", "SLURM_ARRAY_TASK_ID": "3",
           "LAB": str(ROOT), "PARTS": str(tmp_path / "parts")}
    done = subprocess.run(["bash", str(SLURM / "regrade.sbatch")], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "not one of the shards 1-2" in done.stderr
    assert not (tmp_path / "parts").exists()


# --- Kubernetes ------------------------------------------------------------------------------------------------

K8S = TEMPLATES / "kubernetes"


def k8s(name: str) -> list[dict]:
    return list(yaml.safe_load_all((K8S / name).read_text()))


def container_env(container: dict, secrets: dict[str, str]) -> dict[str, str]:
    env = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            if ref["key"] in secrets:
                env[item["name"]] = secrets[ref["key"]]
            else:  # a pod that starts without it: only an optional one may be left out
                assert ref.get("optional") is True, f"{item['name']} needs its secret"
    return env


def test_the_kubernetes_steps_in_the_docs_wait_for_the_loader_pod_before_copying_into_it():
    lines = [line.split("#")[0].strip() for line in (ROOT / "docs" / "regrade.md").read_text().splitlines()
             if line.startswith("kubectl ")]
    applied = lines.index("kubectl apply -f kubernetes/volume.yaml")
    first_cp = next(i for i, line in enumerate(lines) if line.startswith("kubectl cp ") and "attnlab-loader:" in line)
    assert any("kubectl wait" in line and "pod/attnlab-loader" in line for line in lines[applied:first_cp])


def test_the_kubernetes_job_is_indexed_retries_a_failed_index_alone_and_shares_one_volume():
    (job,), (merge,), (clone,) = k8s("regrade-job.yaml"), k8s("merge-job.yaml"), k8s("clone-job.yaml")
    claim, loader = k8s("volume.yaml")
    assert job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["backoffLimitPerIndex"] >= 1 and "backoffLimit" not in spec
    assert 1 <= spec["parallelism"] <= spec["completions"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (grade,) = pod["containers"]
    assert str(grade["resources"]["requests"]["cpu"]) == "2"
    assert container_env(grade, {})["SHARDS"] == str(spec["completions"])
    assert grade["command"] == ["bash", "-c"] and '--shard "auto/$SHARDS"' in grade["args"][0]
    assert claim["kind"] == "PersistentVolumeClaim" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for p in (pod, merge["spec"]["template"]["spec"], loader["spec"], clone["spec"]["template"]["spec"]):
        assert [v["persistentVolumeClaim"]["claimName"] for v in p["volumes"]] == [claim["metadata"]["name"]]
        assert p["imagePullSecrets"] == [{"name": "attnlab-registry"}]  # the image (it holds reference/) is private
    assert merge["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert "grade batch merge" in merge["spec"]["template"]["spec"]["containers"][0]["args"][0]
    (cloner,) = clone["spec"]["template"]["spec"]["containers"]
    assert "grade batch collect" in cloner["args"][0]
    token = next(e for e in cloner["env"] if e["name"] == "GH_TOKEN")["valueFrom"]["secretKeyRef"]
    assert token["name"] != "attnlab-regrade"  # the GitHub token is not in the grading pods' secret
    assert {e["value"] for e in cloner["env"] if e["name"] in ("PREFIX", "ROSTER")} == \
        {e["value"] for e in grade["env"] if e["name"] in ("PREFIX", "ROSTER")}  # one class list
    for container in (grade, merge["spec"]["template"]["spec"]["containers"][0], cloner):  # uid 1000 has no home
        assert {e["name"]: e.get("value") for e in container["env"]}.get("HOME") == "/tmp", container["name"]
    for script in (grade["args"][0], merge["spec"]["template"]["spec"]["containers"][0]["args"][0], cloner["args"][0]):
        done = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


@pytest.mark.slow
@needs_git
def test_the_kubernetes_pods_grade_the_class_by_completion_index_and_a_rerun_resumes(tmp_path, klass):
    """The clone Job's command, then each pod's, run here with the env Kubernetes gives it (JOB_COMPLETION_INDEX
    0..N-1), then the merge Job's; /lab is this repository, /data a folder. A second run of a finished index grades
    nobody again."""
    (job,), (merge,), (clone,) = k8s("regrade-job.yaml"), k8s("merge-job.yaml"), k8s("clone-job.yaml")
    data = tmp_path / "data"
    class_dir, roster = data / "class", data / "roster.csv"
    data.mkdir()
    shutil.copyfile(ROSTER, roster)  # kubectl cp roster.csv attnlab-loader:/data/roster.csv
    cloner = clone["spec"]["template"]["spec"]["containers"][0]
    clone_env = {**base_env(tmp_path / "home"), **container_env(cloner, {"token": "not-a-real-token"}),
                 "FAKEGH_REPOS": str(klass.repos), "ORG": ORG, "PREFIX": PREFIX, "ROSTER": str(roster),
                 "CLASS": str(class_dir), "HOME": str(tmp_path / "home")}
    assert clone_env["GH_TOKEN"] == "not-a-real-token"
    done = subprocess.run([*cloner["command"], *cloner["args"]], cwd=ROOT, env=clone_env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no repository: erin (expected {ORG}/{PREFIX}erin)" in done.stdout
    grade = job["spec"]["template"]["spec"]["containers"][0]
    n = 2  # the instructor's edit: completions and SHARDS
    env = {**base_env(tmp_path / "home"), **container_env(grade, {"seed": SECRETS["ATTNLAB_SEED"]}),
           "SHARDS": str(n), "CLASS": str(class_dir), "PARTS": str(data / "parts"), "DEADLINE": DEADLINE,
           "GRADE_OPTS": "--quick", "ROSTER": str(roster), "PREFIX": PREFIX}
    assert env["ATTNLAB_SEED"] == SECRETS["ATTNLAB_SEED"]
    for index in range(n):
        pod = {**env, "JOB_COMPLETION_INDEX": str(index)}
        done = subprocess.run([*grade["command"], *grade["args"]], cwd=ROOT, env=pod, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(rows(data / "parts" / f"part-{index + 1}" / "grades.csv")) == shards_of(klass, n)[index + 1]
    reports = {p: p.stat().st_mtime_ns for p in (data / "parts" / "part-1" / "grades-reports").iterdir()}
    book = (data / "parts" / "part-1" / "grades.csv").read_bytes()
    again = subprocess.run([*grade["command"], *grade["args"]], cwd=ROOT, env={**env, "JOB_COMPLETION_INDEX": "0"},
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    # graded nobody again: every student kept their row, and their report was not written again
    assert (data / "parts" / "part-1" / "grades.csv").read_bytes() == book
    assert reports and {p: p.stat().st_mtime_ns for p in reports} == reports
    merger = merge["spec"]["template"]["spec"]["containers"][0]
    merge_env = {**base_env(tmp_path / "home"), **container_env(merger, {}), "PARTS": str(data / "parts"),
                 "OUT": str(data / "out")}
    done = subprocess.run([*merger["command"], *merger["args"]], cwd=ROOT, env=merge_env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    check_class_gradebook(data / "out" / "grades.csv", klass)


FAKE_KUBECTL = """#!/usr/bin/env bash
# kubectl get job/NAME -o jsonpath=...: the conditions that are True, or the failed indexes, from $JOB_STATE
case "$*" in
  *failedIndexes*) echo -n "${FAILED_INDEXES:-}" ;;
  *conditions*) echo -n "$(cat "$JOB_STATE")" ;;
esac
"""


@pytest.mark.parametrize("state, code, said", [
    ("Complete ", 0, "job/attnlab-regrade complete"),
    ("FailureTarget Failed ", 1, "job/attnlab-regrade failed (indexes 3,7: shard = index + 1)"),
    ("", 124, "job/attnlab-regrade still running after 1s"),
])
def test_the_kubernetes_wait_ends_when_the_job_fails_not_only_at_its_timeout(tmp_path, state, code, said):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "kubectl").write_text(FAKE_KUBECTL)
    (tmp_path / "bin" / "kubectl").chmod(0o755)
    (tmp_path / "state").write_text(state)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "JOB_STATE": str(tmp_path / "state"), "WAIT_EVERY": "0.2",
           "FAILED_INDEXES": "3,7"}
    done = subprocess.run(["bash", str(TEMPLATES / "kubernetes" / "wait.sh"), "attnlab-regrade", "1s"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == code and said in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_image_takes_only_what_the_grader_needs_of_the_grading_repository():
    rules = [ln.strip() for ln in (TEMPLATES / "kubernetes" / "Dockerfile.dockerignore").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert rules[0] == "*"  # everything out, then back in by name: a class clone, parts, a venv or a key never go in
    assert {r[1:] for r in rules if r.startswith("!")} == {"pyproject.toml", "README.md", "grader", "reference",
                                                           "exercises", "datasets", "known"}
    assert "**/*.seal-key" in rules
    assert "COPY . /lab" in (TEMPLATES / "kubernetes" / "Dockerfile").read_text()


# --- grade release regrade OUT -------------------------------------------------------------------------------

def test_write_copies_every_engine_and_overwrites_nothing(tmp_path):
    written = engines.write(tmp_path / "out")
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == list(engines.FILES.values())
    for name, rel in engines.FILES.items():
        assert (tmp_path / "out" / rel).read_bytes() == (TEMPLATES / name).read_bytes()
        assert os.access(tmp_path / "out" / rel, os.X_OK) is (name in engines.EXECUTABLE)
    with pytest.raises(FileExistsError) as refused:
        engines.write(tmp_path / "out")
    assert refused.value.filename == str(tmp_path / "out" / ".github" / "workflows" / "regrade.yml")
    other = tmp_path / "other"
    (other / "slurm").mkdir(parents=True)
    (other / "slurm" / "submit.sh").write_text("mine\n")
    with pytest.raises(FileExistsError, match=re.escape(str(other / "slurm" / "submit.sh"))):
        engines.write(other)
    assert sorted(p.relative_to(other).as_posix() for p in other.rglob("*")) == ["slurm", "slurm/submit.sh"]
    assert (other / "slurm" / "submit.sh").read_text() == "mine\n"


def test_the_grading_repository_pushed_as_it_is_starts_only_the_regrade(tmp_path):
    """`grade release regrade --repository OUT`: the lab the regrade installs and reads, the engines' files, and no
    workflow that a push, a pull request or a schedule would start (the lab's ci.yml and classroom.yml stay out)."""
    out = tmp_path / "grading"
    done = CliRunner().invoke(cli, ["release", "regrade", str(out), "--repository"])
    assert done.exit_code == 0, done.output
    workflows = sorted((out / ".github" / "workflows").iterdir())
    assert [w.name for w in workflows] == ["regrade.yml"]
    for workflow in workflows:
        doc = yaml.safe_load(workflow.read_text())
        triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
        assert set(triggers) == {"workflow_dispatch"}, (workflow.name, triggers)
    for needed in ("pyproject.toml", "README.md", "grader/cases/manifest.json", "reference/decoder.py",
                   "exercises/decoder.py", "datasets", "slurm/regrade.sbatch", "kubernetes/regrade-job.yaml"):
        assert (out / needed).exists(), needed
    assert not [p for p in out.rglob("*") if p.name in ("__pycache__", "tests", ".ci", "sealed.bin")
                or p.suffix == ".pyc" or p.is_symlink()]
    again = CliRunner().invoke(cli, ["release", "regrade", str(out), "--repository"])
    assert again.exit_code == 2 and "exists already" in again.output  # a folder that holds anything: nothing written


def test_every_template_is_written_and_none_reaches_a_student_release(tmp_path):
    on_disk = sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*") if p.is_file())
    assert on_disk == sorted(engines.FILES)
    tracked = subprocess.run(["git", "ls-files", "grader/templates/regrade"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert sorted(tracked) == [f"grader/templates/regrade/{n}" for n in sorted(engines.FILES)]  # a release copies these
    built, _ = release.student(tmp_path / "rel")
    shipped = sorted(p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file())
    assert {"grader/__init__.py", "grader/sealed.bin", "README.md"} <= set(shipped)  # a release, built here
    assert not (built / "grader" / "templates" / "regrade").exists()
    assert not [rel for rel in shipped if rel.startswith("grader/templates/regrade")]


def test_the_outputs_reader_takes_both_forms_and_refuses_a_heredoc_actions_would_fail_on():
    assert parse_outputs("a=1\nb<<EOF\nx=2\n\ny\nEOF\nc=three=3\n") == {"a": "1", "b": "x=2\n\ny", "c": "three=3"}
    assert parse_outputs("b<<EOF\nEOF\n") == {"b": ""}
    with pytest.raises(ValueError, match="b<<EOF has no closing EOF line"):
        parse_outputs("a=1\nb<<EOF\nx\ny\n")
    with pytest.raises(ValueError, match="no closing"):
        parse_outputs("b<<EOF\nx\n EOF\n")  # the delimiter alone on its line, as Actions reads it
