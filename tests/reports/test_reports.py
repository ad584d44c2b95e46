"""Reports read by other tools, checked against those tools' own rules."""
from __future__ import annotations

import base64
import json

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
    from grader.runner import report

    if fmt == "text":
        return report.to_text(runs, "sub\udcff", quick=(1, 5))
    if fmt == "classroom":
        return base64.b64decode(report.to_classroom(runs)).decode("utf-8")
    return report.FORMATS[fmt](runs, quick=(1, 5))


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "gradescope", "classroom"])
def test_a_message_with_lone_surrogates_and_controls_renders_printable_in_every_format(fmt):
    import xml.etree.ElementTree as ET

    text = rendered(fmt, runs_saying(UNPRINTABLE))
    text.encode("utf-8")  # strict: a lone surrogate raised here, and `grade --out` left an empty file
    assert not any(ch in text for ch in "\ufffe\u202e\x9b\x00")
    assert "\ufffd" in text or "\\ufffd" in text  # the surrogates became U+FFFD, shown or JSON-escaped
    if fmt == "junit":
        root = ET.fromstring(text.encode("utf-8"))  # an XML parser takes it
        assert "surrogates" in root.find(".//failure").get("message")
    elif fmt != "text":
        assert "surrogates" in json.dumps(json.loads(text), ensure_ascii=False)
    else:
        assert "surrogates" in text and "grading sub\ufffd" in text


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "gradescope"])
def test_a_grader_error_with_a_lone_surrogate_renders_printable(fmt):
    from grader.runner.report import grader_error

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
