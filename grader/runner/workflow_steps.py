"""The per-push workflow's own steps after `grade` (.github/workflows/classroom.yml), run as
`python -I grader/workflow.py summary REPORT.json [ARTIFACT]` and `python -I grader/workflow.py reporter RUNNER`.

summary: from the JSON report `grade --format json` wrote, the job summary (Markdown, appended to
$GITHUB_STEP_SUMMARY) and the step output `result`, the base64 payload the Classroom reporter read.
reporter: from `<RUNNER>_RESULTS` (that payload), what the reporter printed: its log, its "Points X/Y" and
"Autograding report" notices, and its error and exit code 1 when a test failed.
classroom50: from the JSON report, Classroom 50's result.json (its identity from the runner's environment) and
release-body.md (this Markdown report) in OUT; `public` when the public smoke checks ran (no seal key), and then
also the commit status `failure` with a "not graded" summary in $GITHUB_OUTPUT, which the runner posts as it is;
`signed KEY_FILE BUNDLE` when the graded cases ran: the result signed with the key derived from the seal key, for
this autograder folder (grader.runner.attest).
"""
from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

from grader.runner import markdown, reporter
from grader.runner.report import classroom_payload, safe


def read_report(report_path: Path) -> dict | None:
    """The JSON report `grade --format json` wrote, or None (said in one line) where it holds no grade."""
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
        report["pieces"], report["score"], report["max_score"]
        return report
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"::error title=Grading failed::{safe(report_path.name)} is not a graded report "
              f"({safe(type(e).__name__)}); no points are posted.")
        return None


def summary(report_path: Path, artifact: str | None) -> int:
    report = read_report(report_path)
    if report is None:
        return 2
    text = markdown.render(report, artifact=artifact)
    if "GITHUB_STEP_SUMMARY" in os.environ:
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    payload = base64.b64encode(json.dumps(classroom_payload(reporter.runs_from_report(report))).encode()).decode()
    if "GITHUB_OUTPUT" in os.environ:
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
            f.write(f"result={payload}\n")
    return 0


def report_points(runner: str) -> int:
    if not runner.isalnum():
        print("::error::The runners input must be a comma-separated list of strings.")
        return 1
    try:
        payload = json.loads(base64.b64decode(os.environ[f"{runner.upper()}_RESULTS"], validate=True))
        payload["tests"]
    except (KeyError, ValueError, TypeError) as e:
        print(f"::error::{safe(type(e).__name__)}: no payload of runner {runner} to report")
        return 1
    lines = reporter.log(runner, payload) + reporter.notices(payload)
    failed = reporter.failure(payload)
    print("\n".join(lines + ([f"::error::{failed}"] if failed else [])), flush=True)
    return 1 if failed else 0


def classroom50_files(report_path: Path, out: Path, public: bool, signer: tuple[Path, Path] | None = None) -> int:
    from grader.runner import classroom50_result

    report = read_report(report_path)
    if report is None:
        return 2
    missing = classroom50_result.missing_identity()
    if missing:
        print(f"::error title=Grading failed::Classroom 50's runner did not set {', '.join(missing)}; no score is posted.")
        return 2
    doc = classroom50_result.result(reporter.runs_from_report(report), public=public)
    if signer is not None:
        doc = signed(doc, *signer)
        if doc is None:
            return 2
    (out / "result.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (out / "release-body.md").write_text(markdown.render(report, public=public), encoding="utf-8")
    posted = classroom50_result.status(doc, public=public)
    if posted and "GITHUB_OUTPUT" in os.environ:  # the runner posts this instead of deriving one from the tests
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
            f.write("status={}\nsummary={}\n".format(*posted))
    return 0


def signed(doc: dict, key_file: Path, bundle: Path) -> dict | None:
    """`doc` signed for this repository, commit and autograder folder, or None (said in one line): a keyed run
    whose result cannot be signed posts nothing rather than a score `grade batch verify` would call unsigned."""
    from grader.runner import attest

    repository, commit = (os.environ.get(name, "").strip() for name in ("GITHUB_REPOSITORY", "GITHUB_SHA"))
    if not repository or not commit:
        print("::error title=Grading failed::Classroom 50's runner did not set GITHUB_REPOSITORY and GITHUB_SHA, which "
              "the result's signature names; no score is posted.")
        return None
    try:
        return attest.sign(doc, key_file.read_bytes(), repository=repository, commit=commit,
                           bundle=attest.bundle_digest(bundle))
    except (OSError, ValueError) as e:
        print(f"::error title=Grading failed::the result could not be signed ({safe(str(e), 200)}); no score is "
              "posted.")
        return None


def main(argv: list[str]) -> int:
    if len(argv) in (2, 3) and argv[0] == "summary":
        return summary(Path(argv[1]), argv[2] if len(argv) == 3 else None)
    if len(argv) == 2 and argv[0] == "reporter":
        return report_points(argv[1])
    if len(argv) in (3, 4) and argv[0] == "classroom50" and argv[3:] in ([], ["public"]):
        return classroom50_files(Path(argv[1]), Path(argv[2]), public=argv[3:] == ["public"])
    if len(argv) == 6 and argv[0] == "classroom50" and argv[3] == "signed":
        return classroom50_files(Path(argv[1]), Path(argv[2]), public=False, signer=(Path(argv[4]), Path(argv[5])))
    print("usage: python -I grader/workflow.py summary REPORT.json [ARTIFACT] | reporter RUNNER | "
          "classroom50 REPORT.json OUT [public | signed KEY_FILE BUNDLE]", file=sys.stderr)
    return 2
