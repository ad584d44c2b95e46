"""The pytest plugin on its own, driven with pytester."""
from __future__ import annotations

import hashlib
import hmac
import json
import sys

import pytest

from grader import ROOT

pytest_plugins = ["pytester"]
KEY = b"k" * 16

CASES = """
import time
import pytest

pytestmark = pytest.mark.piece("encoder")

@pytest.mark.points(2)
def test_passes(sub, ref):
    sub.new("EncoderAll")
    assert ref.encoder.EncoderAll is not None

@pytest.mark.points(1)
@pytest.mark.timeout(1)
def test_hangs(sub):
    while True:
        time.sleep(0.01)

@pytest.mark.points(3)
def test_still_runs_after_a_hang(sub):
    from grader.judge.verdicts import fail
    fail("a hint for the student")
"""


def run_graded(pytester: pytest.Pytester, cases: str, encoder: str, *extra: str):
    sub = pytester.mkdir("sub")
    (sub / "encoder.py").write_text(encoder)
    pytester.makepyfile(test_cases=cases)
    records = pytester.path / "records.jsonl"
    (pytester.path / "key.txt").write_bytes(KEY + b"\n")
    code = (
        "import os, sys, pytest\n"
        "fd = os.open('key.txt', os.O_RDONLY)\n"
        "sys.exit(pytest.main(['--attnlab-key-fd', str(fd)] + sys.argv[1:]))\n"
    )
    result = pytester.run(
        sys.executable, "-c", code, "-p", "grader.judge.plugin", "-p", "pytest_timeout", "-p", "no:cacheprovider",
        "--attnlab-submission", str(sub), "--attnlab-piece", "encoder", "--attnlab-records", str(records),
        "--attnlab-reference", str(ROOT / "reference"), *extra, "test_cases.py", timeout=120,
    )
    rows = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
    return result, rows


@pytest.fixture
def plain(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester


def test_the_plugin_is_inert_without_a_submission(plain):
    plain.makepyfile("""
        import pytest

        @pytest.mark.piece("encoder")
        @pytest.mark.points(2)
        def test_plain():
            assert True
    """)
    result = plain.runpytest_subprocess("-p", "grader.judge.plugin", "--strict-markers")
    result.assert_outcomes(passed=1)


def test_markers_are_registered_with_their_signature(plain):
    result = plain.runpytest_subprocess("-p", "grader.judge.plugin", "--markers")
    result.stdout.fnmatch_lines(["*piece(name)*", "*points(n)*", "*slow*"])


def test_a_hanging_case_keeps_the_other_cases_records(plain):
    result, rows = run_graded(plain, CASES, "import torch\nclass EncoderAll: pass\n")
    by_case = {json.loads(r["record"])["case"]: json.loads(r["record"]) for r in rows}
    assert by_case["test_passes"]["passed"] is True
    assert by_case["test_hangs"]["passed"] is False and "timed out" in by_case["test_hangs"]["message"]
    assert by_case["test_still_runs_after_a_hang"]["message"] == "a hint for the student"


def test_every_record_is_signed_with_the_parents_key(plain):
    _, rows = run_graded(plain, CASES, "class EncoderAll: pass\n")
    assert rows
    for row in rows:
        assert hmac.compare_digest(hmac.new(KEY, row["record"].encode(), hashlib.sha256).hexdigest(), row["mac"])


def test_a_case_without_a_piece_marker_is_refused_when_grading(plain):
    result, rows = run_graded(plain, "def test_orphan(sub):\n    pass\n", "class EncoderAll: pass\n")
    assert result.ret != 0 and not rows
    assert "lacks a piece or points marker" in result.stdout.str() + result.stderr.str()


def test_an_import_error_becomes_every_cases_message(plain):
    _, rows = run_graded(plain, CASES, "raise RuntimeError('boom')\n", "-k", "passes")
    rec = json.loads(rows[0]["record"])
    assert rec["passed"] is False and "importing encoder.py raised RuntimeError: boom" in rec["message"]


SAYS_TIMED_OUT = """
import time
import pytest

from grader.judge.plugin import HUNG_TIMEOUT

pytestmark = pytest.mark.piece("encoder")

@pytest.mark.points(1)
def test_first(sub):
    FIRST

@pytest.mark.points(1)
def test_a_later_case_that_takes_longer_than_a_hung_pieces_budget(sub):
    time.sleep(HUNG_TIMEOUT + 0.5)
"""


@pytest.mark.parametrize("first, hung", [
    ("from grader.judge.verdicts import fail; fail('timed out waiting for the second half: a hint of its own')", False),
    ("time.sleep(3)", True),  # pytest-timeout stops it: the piece hangs, and the later cases get a short budget
])
def test_a_piece_is_hung_by_a_timeout_never_by_a_message_that_begins_with_its_words(plain, first, hung):
    cases = SAYS_TIMED_OUT.replace("FIRST", first).replace("@pytest.mark.points(1)\ndef test_first",
                                                           "@pytest.mark.points(1)\n@pytest.mark.timeout(1)\ndef test_first")
    _, rows = run_graded(plain, cases, "class EncoderAll: pass\n")
    by_case = {json.loads(r["record"])["case"]: json.loads(r["record"]) for r in rows}
    assert by_case["test_first"]["passed"] is False and by_case["test_first"]["message"].startswith("timed out")
    later = by_case["test_a_later_case_that_takes_longer_than_a_hung_pieces_budget"]
    assert later["passed"] is (not hung), later
