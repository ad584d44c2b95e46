"""What classroom-resources/autograding-grading-reporter@v1 printed, printed by the workflow's own step.

The reporter (its v1 tag, commit d13b591: src/console-results.js, src/aggregate-results.js,
src/notify-classroom.js, src/main.js) declares node20, which GitHub's runners no longer ship; and since GitHub
Classroom's retirement nothing reads what it posts. Tools that parsed its run log or its annotations still can:
`log` is its log line for line (its own colour codes; cli-table3 draws no colour off a terminal), `notices` its two
annotations, and `failure` the error with which it failed the job (some test failed, or errored).

It reads a runner's payload (`report.classroom_payload`) from `<RUNNER>_RESULTS`, base64, as it did; the workflow
builds that payload from the JSON report (`runs_from_report`), so one run of `grade` gives the JSON artifact,
the job summary and these lines.
"""
from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal

from grader.runner.report import safe
from grader.runner.results import CaseResult, PieceRun

GREEN, RED, CYAN, MAGENTA, RESET = "\x1b[32m", "\x1b[31m", "\x1b[36m", "\x1b[35m", "\x1b[0m"
COLUMNS = (20, 13, 13)  # aggregate-results.js: colWidths, padding included (one space each side)


def js_number(x: float) -> str:
    """A JavaScript number as `${x}` writes it (the range a score takes: no exponent)."""
    if math.isnan(x):
        return "NaN"
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def to_fixed(x: float, digits: int = 2) -> str:
    """Number.prototype.toFixed: the exact value of the double, a tie rounded up."""
    if math.isnan(x):
        return "NaN"
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def test_score(payload: dict) -> float:
    """test-helpers.js getTestScore at v1: passed tests / tests x max_score (NaN for no tests)."""
    tests = payload["tests"]
    passed = sum(t["status"] == "pass" for t in tests)
    return passed / len(tests) * (payload.get("max_score") or 0) if tests else math.nan


def table(rows: list[tuple[str, str, str]]) -> list[str]:
    """cli-table3's default box, every row ruled off, a cell cut to its width with "…"."""
    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * w for w in COLUMNS) + right

    def line(cells: tuple[str, str, str]) -> str:
        fit = [c if len(c) <= w - 2 else c[: w - 3] + "…" for c, w in zip(cells, COLUMNS)]
        return "│" + "│".join(f" {c:<{w - 2}} " for c, w in zip(fit, COLUMNS)) + "│"

    out = [rule("┌", "┬", "┐")]
    for i, row in enumerate(rows):
        if i:
            out.append(rule("├", "┼", "┤"))
        out.append(line(row))
    return out + [rule("└", "┴", "┘")]


def log(runner: str, payload: dict) -> list[str]:
    """ConsoleResults then AggregateResults, for one runner: its lines as console.log wrote them."""
    out = [f"🔄 Processing: {runner}"]
    for t in payload["tests"]:
        name = safe(t["name"])
        at = f" - line {t['line_no']}" if t.get("line_no") else ""
        if t["status"] == "pass":
            out.append(f"{GREEN}✅ {name}{at}{RESET}")
        elif t["status"] == "error":
            out += [f"Error: {safe(t.get('message') or '') or f'Failed to run test {name!r}'}", RESET]
        else:
            out.append(f"{RED}❌ {name}{at}{RESET}")
        if t.get("test_code"):
            out += ["Test code:", safe(t["test_code"]), ""]
    score, top = test_score(payload), payload.get("max_score") or 0
    if top:
        out += [f"Total points for {runner}: {to_fixed(score)}/{top}", ""]
    out.append(f"{MAGENTA}Test runner summary{MAGENTA}")
    out += table([("Test Runner Name", "Test Score", "Max Score"), (runner, js_number(score), str(top)),
                  ("Total: ", js_number(score), str(top))])
    passed = sum(t["status"] == "pass" for t in payload["tests"])
    return out + [f"{CYAN}🏆 Grand total tests passed: {passed}/{len(payload['tests'])}{RESET}", ""]


def notices(payload: dict) -> list[str]:
    """NotifyClassroom: `Points X/Y` titled "Autograding complete", then {"totalPoints", "maxPoints"} titled
    "Autograding report" (the sum of tests[].score); nothing where max_score is 0."""
    top = payload.get("max_score") or 0
    if not top:
        return []
    got = sum(t["score"] for t in payload["tests"])
    summary = json.dumps({"totalPoints": got, "maxPoints": top}, separators=(",", ":"))
    return [f"::notice title=Autograding complete::Points {got}/{top}",
            f"::notice title=Autograding report::{summary}"]


def failure(payload: dict) -> str | None:
    """main.js: the job fails when the runner's status is fail, or error."""
    return {"fail": "Some tests failed.", "error": "Some tests errored."}.get(payload.get("status"))


def runs_from_report(report: dict) -> list[PieceRun]:
    """The piece runs a JSON report (`report.as_dict`) was made from, as far as the Classroom payload needs them:
    names, points, verdicts and messages. The JSON keeps no piece status, so a piece that crashed makes the
    payload's status "fail" (its cases failed) where `grade --format classroom` says "error"."""
    return [PieceRun(p["name"], [CaseResult(c["name"], c["max_points"], c["passed"], c["message"], c["skipped"],
                                            c["duration"]) for c in p["cases"]],
                     seconds=p["seconds"], jail=list(p.get("jail_missing", [])))
            for p in report["pieces"]]
