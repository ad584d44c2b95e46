"""Reports read by other tools, checked against those tools' own rules."""
from __future__ import annotations

import base64
import json
import re

import pytest

from grader.runner.report import classroom_payload, to_classroom, total_score
from grader.runner.results import CaseResult, PieceRun


def reporter_log_points(payload: dict) -> float:
    """The reporter's log table (autograding-grading-reporter src/helpers/test-helpers.js getTestScore):
    passed tests / tests x max_score."""
    passed = sum(t["status"] == "pass" for t in payload["tests"])
    return passed / len(payload["tests"]) * (payload["max_score"] or 0)


def reporter_annotation_points(payload: dict) -> tuple[float, int]:
    """The reporter's Classroom annotation (src/notify-classroom.js): the sum of tests[].score over max_score."""
    return sum(t["score"] for t in payload["tests"]), payload["max_score"]


def runs_with(failed: set[str]) -> list[PieceRun]:
    """Two pieces with cases worth 3, 2, 1 and 0 points; the named cases fail."""
    def case(name: str, points: int) -> CaseResult:
        return CaseResult(name, points, name not in failed, "off by a transpose" if name in failed else "")

    return [PieceRun("additive", [case("a3", 3), case("a2", 2), case("a1", 1), case("cuda", 0)]),
            PieceRun("decoder", [case("d5", 5), case("d1", 1)])]


@pytest.mark.parametrize("failed", [set(), {"a1"}, {"a2"}, {"a3", "d1"}, {"d5"}, {"a3", "a2", "a1", "d5", "d1"}])
def test_the_reporters_log_and_annotation_both_show_the_graders_points(failed):
    runs = runs_with(failed)
    payload = json.loads(base64.b64decode(to_classroom(runs)))
    got, top = total_score(runs)
    assert reporter_annotation_points(payload) == (got, top)
    assert reporter_log_points(payload) == pytest.approx(got, abs=1e-9)  # the log printed "50.83/61" before


def test_a_case_worth_k_points_is_k_tests_that_pass_or_fail_together_with_its_hint():
    payload = classroom_payload(runs_with({"a2"}))
    a2 = [t for t in payload["tests"] if t["name"].startswith("additive: a2")]
    assert [t["name"] for t in a2] == ["additive: a2 (1/2)", "additive: a2 (2/2)"]
    assert all(t["status"] == "fail" and t["score"] == 0 and t["message"] == "off by a transpose" for t in a2)
    assert not any("cuda" in t["name"] for t in payload["tests"])  # point-free cases would skew the log's ratio
    assert payload["status"] == "fail"


# ---- untrusted text in every format ----

UNPRINTABLE = ("raised ValueError: lone \ud800 and \udcff surrogates, a pair \ud83d\ude00, a non-character \ufffe, "
               "a bidi override \u202e1/9\u202c, an 8-bit CSI \x9b31m and a NUL \x00")


def runs_saying(message: str) -> list[PieceRun]:
    return [PieceRun("context", [CaseResult("test_a", 3, False, message), CaseResult("test_b", 0, False, message,
                                                                                   skipped=True)],
                     output=message + "\n", jail=[message])]


def rendered(fmt: str, runs: list[PieceRun]) -> str:
    from grader.runner.formats import render

    text = render(fmt, runs, quick=(1, 5), seconds=1.0, source="sub\udcff")
    return base64.b64decode(text).decode("utf-8") if fmt == "classroom" else text


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "gradescope", "classroom", "markdown"])
def test_a_message_with_lone_surrogates_and_controls_renders_printable_in_every_format(fmt):
    import xml.etree.ElementTree as ET

    text = rendered(fmt, runs_saying(UNPRINTABLE))
    text.encode("utf-8")  # strict: a lone surrogate raised here, and `grade --out` left an empty file
    assert not any(ch in text for ch in "\ufffe\u202e\x9b\x00")
    assert "\ufffd" in text or "\\ufffd" in text  # the surrogates became U+FFFD, shown or JSON-escaped
    if fmt == "junit":
        root = ET.fromstring(text.encode("utf-8"))  # an XML parser takes it
        assert "surrogates" in root.find(".//failure").get("message")
    elif fmt == "markdown":
        assert "surrogates" in text and "quick run" in text
    elif fmt != "text":
        assert "surrogates" in json.dumps(json.loads(text), ensure_ascii=False)
    else:
        assert "surrogates" in text and "grading sub\ufffd" in text


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "gradescope", "markdown"])
def test_a_grader_error_with_a_lone_surrogate_renders_printable(fmt):
    from grader.runner.formats import grader_error

    grader_error(fmt, "judge exited: \ud800").encode("utf-8")


def test_safe_keeps_printable_text_and_a_valid_surrogate_pair():
    from grader.runner.report import safe

    assert safe("αβγ ✓ 😀 tab\there") == "αβγ ✓ 😀 tab here"
    assert safe("\ud83d\ude00") == "😀"
    assert safe("\ud800" * 400, 10) == "\ufffd" * 9 + "…"


def test_an_unwritten_piece_is_one_line_in_a_full_run_whose_training_case_did_not_run():
    from grader.runner.report import to_text

    stub = "not implemented yet (piece 'luong': write LuongDotAttention.forward)"
    waiting = "not run: the grader trains the model only once 'x' passes; fix that case first"
    runs = [PieceRun("luong", [CaseResult("test_a", 3, False, stub), CaseResult("test_b", 2, False, stub),
                               CaseResult("test_train", 5, False, waiting)])]
    lines = to_text(runs, "exercises").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("✗ luong"))
    assert lines[at + 1].strip() == stub and not lines[at + 2].strip()  # that line alone, nothing "not run"
    written = [PieceRun("luong", [CaseResult("test_a", 3, False, "off by 1e-1"), CaseResult("test_train", 5, False, waiting)])]
    assert "not run: the grader trains" in to_text(written, "exercises")  # a written piece still says why


# ---- the Markdown report (a GitHub job summary) ----

# what a student's exception can say: a link, an image, HTML, an autolink, a mention, emphasis, backticks, pipes
HOSTILE = ("raised ValueError: [grade 73/73](https://evil.example/x) ![i](https://evil.example/i.png) "
           "<img src=x onerror=alert(1)> <a href='https://evil.example'>here</a> www.evil.example a@evil.example "
           "@octocat #1 **bold** `tick` ``two`` | cell \\| end \\")


def outside_code_spans(markdown: str) -> str:
    return re.sub(r"(`+) .*? \1(?!`)", "", markdown)


def test_markdown_gives_the_total_a_piece_table_and_a_case_table_with_hints():
    from grader.runner.formats import render

    text = render("markdown", runs_with({"a2", "d5"}))
    lines = text.splitlines()
    assert lines[0] == "## Attention lab: 5/12 points"
    assert "| additive | 4/6 | ❌ 1 of 4 cases failed |" in lines and "| decoder | 1/6 | ❌ 1 of 2 cases failed |" in lines
    assert "| **Total** | **5/12** | |" in lines
    assert "| additive | ✅ a3 | 3/3 |  |" in lines
    assert "| additive | ❌ a2 | 0/2 | ` off by a transpose ` |" in lines
    assert "| decoder | ❌ d5 | 0/5 | ` off by a transpose ` |" in lines
    assert "| additive | ✅ cuda | 0/0 |  |" in lines  # a point-free case that ran
    assert render("markdown", runs_with(set())).startswith("## Attention lab: 12/12 points\n")


def test_markdown_says_a_stub_once_for_all_its_cases_and_marks_a_quick_run():
    from grader.runner.report import to_markdown

    stub = "not implemented yet (piece 'luong': write LuongDotAttention.forward)"
    runs = [PieceRun("luong", [CaseResult("test_a", 3, False, stub), CaseResult("test_b", 2, False, stub)])]
    text = to_markdown(runs, quick=(1, 5))
    assert f"| luong | ❌ all 2 cases | 0/5 | ` {stub} ` |" in text.splitlines()
    assert "quick run\\: 1 training case\\(s\\) worth 5 points left out\\; this is not the grade" in text


def test_markdown_shows_a_students_markdown_and_html_only_inside_code_spans():
    from grader.runner import markdown

    text = markdown.to_markdown(runs_saying(HOSTILE))
    assert "evil.example" in text  # shown...
    shown = outside_code_spans(text)
    for sign in ("evil.example", "<img", "<a ", "](", "**bold**", "@octocat", "#1"):  # ...never as Markdown
        assert sign not in shown, (sign, shown)
    row = next(ln for ln in text.splitlines() if ln.startswith("| context | ❌"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 5, row  # each pipe of the message escaped: four cells
    assert markdown.code("a ``` b") == "```` a ``` b ````" and markdown.code("   ") == ""
    assert markdown.md("[x](https://e.x) <b>") == "\\[x\\]\\(https\\:\\/\\/e\\.x\\) \\<b\\>"


def test_markdown_renders_as_github_does_with_no_link_image_or_html_of_the_students():
    """GitHub's own renderer (cmark-gfm, with its table and autolink extensions), where cmarkgfm is installed."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from grader.runner import markdown

    html = cmarkgfm.github_flavored_markdown_to_html(markdown.to_markdown(runs_saying(HOSTILE)))
    assert "<a " not in html and "<img" not in html and "<strong>bold" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "| cell \\| end" in html
    assert html.count("<tr>") == 5  # two header rows, the piece, the total and the one case: no cell split off


def test_markdown_keeps_under_githubs_summary_limit_and_says_how_many_cases_it_left_out():
    from grader.runner import markdown

    runs = [PieceRun(f"p{i}", [CaseResult(f"case_{j}", 1, False, f"{j}" + "|" * 300) for j in range(100)]) for i in range(40)]
    text = markdown.to_markdown(runs)
    assert len(text.encode()) <= markdown.BUDGET < markdown.LIMIT
    left = re.search(r"\((\d+) more case rows left out", text)
    assert left and int(left.group(1)) == 4000 - sum("| ❌ case" in ln for ln in text.splitlines())
    assert text.splitlines()[0] == "## Attention lab: 0/4000 points"


def test_markdown_of_a_grader_error_posts_no_points():
    from grader.runner.formats import grader_error

    text = grader_error("markdown", "judge exited: <img src=x>")
    assert text.startswith("## Attention lab: not graded") and "/" not in text.split("\n")[0]
    assert "<img" not in outside_code_spans(text)


# ---- the reporter's output, printed without it (grader.runner.reporter) ----

def test_the_reporters_log_notices_and_failure_show_the_graders_points():
    from grader.runner import reporter

    runs = runs_with({"a2"})
    payload = classroom_payload(runs)
    got, top = total_score(runs)
    assert reporter.notices(payload) == [f"::notice title=Autograding complete::Points {got}/{top}",
                                         f'::notice title=Autograding report::{{"totalPoints":{got},"maxPoints":{top}}}']
    log = reporter.log("attentionlab", payload)
    assert log[0] == "🔄 Processing: attentionlab"
    assert "\x1b[32m✅ additive: a3 (1/3)\x1b[0m" in log and "\x1b[31m❌ additive: a2 (2/2)\x1b[0m" in log
    assert log[log.index("\x1b[32m✅ additive: a3 (1/3)\x1b[0m") + 1:][:3] == ["Test code:", "grade additive", ""]
    assert f"Total points for attentionlab: {got}.00/{top}" in log
    assert log[-9:] == ["┌────────────────────┬─────────────┬─────────────┐",
                        "│ Test Runner Name   │ Test Score  │ Max Score   │",
                        "├────────────────────┼─────────────┼─────────────┤",
                        f"│ attentionlab       │ {got:<11} │ {top:<11} │",
                        "├────────────────────┼─────────────┼─────────────┤",
                        f"│ Total:             │ {got:<11} │ {top:<11} │",
                        "└────────────────────┴─────────────┴─────────────┘",
                        f"\x1b[36m🏆 Grand total tests passed: {got}/{top}\x1b[0m", ""]
    assert reporter.failure(payload) == "Some tests failed."
    assert reporter.failure(classroom_payload(runs_with(set()))) is None
    assert reporter.notices({"max_score": 0, "tests": []}) == []  # the reporter posts nothing for no points


def test_the_reporters_numbers_are_javascripts():
    from grader.runner import reporter

    payload = {"max_score": 25, "tests": [{"status": "pass" if i < 7 else "fail"} for i in range(25)]}
    score = reporter.test_score(payload)
    assert reporter.js_number(score) == "7.000000000000001"  # 7 / 25 * 25 in doubles, as the v1 log printed it
    assert [reporter.to_fixed(x) for x in (score, 0.125, 2.5)] == ["7.00", "0.13", "2.50"]  # a tie rounds up
    row = reporter.table([("attentionlab", reporter.js_number(score), "25")])[1]
    assert row == "│ attentionlab       │ 7.00000000… │ 25          │"  # cli-table3 cuts a cell to its width
    assert reporter.js_number(reporter.test_score({"max_score": 3, "tests": []})) == "NaN"


@pytest.mark.parametrize("failed", [set(), {"a1"}, {"a3", "d1"}, {"a3", "a2", "a1", "d5", "d1"}])
def test_the_payload_built_from_the_json_report_is_the_classroom_payload(failed):
    from grader.runner.report import as_dict
    from grader.runner.reporter import runs_from_report

    runs = runs_with(failed)
    rebuilt = classroom_payload(runs_from_report(json.loads(json.dumps(as_dict(runs)))))
    assert rebuilt == classroom_payload(runs)


def test_the_summary_step_writes_the_summary_and_the_payload_and_refuses_an_error_report(tmp_path, monkeypatch):
    from grader.runner import workflow_steps
    from grader.runner.formats import grader_error
    from grader.runner.report import as_dict

    report = tmp_path / "report.json"
    report.write_text(json.dumps(as_dict(runs_with({"d1"}))))
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    assert workflow_steps.main(["summary", str(report), "grade-report"]) == 0
    assert summary.read_text().startswith("## Attention lab: 11/12 points") and "` grade-report `" in summary.read_text()
    payload = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    assert payload == classroom_payload(runs_with({"d1"}))
    report.write_text(grader_error("json", "judge exited"))
    assert workflow_steps.main(["summary", str(report)]) == 2
    assert output.read_text().count("result=") == 1
