"""What a piece prints or raises: floods that must keep the report short, fake report lines and workflow
commands that must stay inside the printed section, escapes in a message, lone surrogates in every format."""
from __future__ import annotations

import base64
import json
import time
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.runner.launch import OUTPUT_LIMIT

from .harness import CONTEXT_SOLUTION, FULL, full_marks, hostile, judge, run_cli

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


def test_printing_fifty_megabytes_keeps_the_report_short(lab, arena):
    end = '''
        import sys as _sys
        _line = "flood " * 1000 + "\\n"
        for _ in range(50 * 2**20 // len(_line)):
            _sys.stdout.write(_line)
        _sys.stdout.flush()
    '''
    start = time.monotonic()
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n", end=end)}), ["context", "luong"])
    full_marks(g, "context", "luong")  # printing is not wrong
    assert len(g.output) <= OUTPUT_LIMIT * 2
    assert max(map(len, g.text.splitlines())) <= 200
    assert time.monotonic() - start < 60
    arena.assert_unharmed(g.everything)


def test_endless_writes_without_newlines_and_a_huge_line_keep_the_report_short(lab, arena):
    end = '''
        import sys as _sys, time as _time
        _stop = _time.monotonic() + 0.3
        while _time.monotonic() < _stop:
            _sys.stdout.write("z" * 4096)
        print("y" * 20_000_000)
        _sys.stderr.write("w" * 5_000_000)
    '''
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n", end=end)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    assert len(g.output) <= OUTPUT_LIMIT * 2
    assert max(map(len, g.text.splitlines())) <= 200
    arena.assert_unharmed(g.everything)


def test_printed_fake_report_lines_stay_inside_the_printed_section(lab, arena, tmp_path):
    fake = '''
        _payload()
        import sys as _sys
        for _line in ("::error file=exercises/context.py::all cases passed", "::set-output name=result::AAAA",
                      "::add-mask::x", "Points 68/68", "Total: 68/68", "\\u2713 context       9/9",
                      "\\x1b[2K\\rTotal: 99/99", "\\rTotal: 98/98", "ok\\r\\n::warning::fake"):
            print(_line)
        _sys.stdout.write("Total: 68/68\\n" * 3)
        _sys.stderr.write("::error::from stderr\\n")
    '''
    g = run_cli(lab(files={"context": hostile("context", arena, call=fake)}), ["context", "luong"], tmp_path)
    full_marks(g, "context", "luong")
    lines = g.text.splitlines()
    totals = [ln for ln in lines if ln.startswith("Total:")]
    want = FULL["context"] + FULL["luong"]
    assert len(totals) == 1 and totals[0].startswith(f"Total: {want}/{want}"), totals
    assert not [ln for ln in lines if ln.startswith(("::", "Points", "\x1b", "\r"))]
    assert len([ln for ln in lines if ln.startswith("\u2713")]) == 2  # the two real piece rows
    assert any(": :error" in ln for ln in lines)  # the prints are shown, escaped
    arena.assert_unharmed(g.everything)


def test_printed_workflow_commands_reach_the_report_only_escaped(lab):
    loud = "print('::error::fake'); print('Autograding report'); print('Points 66/66')"
    sub = lab(edits={"context": [("    ### BEGIN SOLUTION\n    return", f"    ### BEGIN SOLUTION\n    {loud}\n    return")]})
    from click.testing import CliRunner

    from grader.cli import cli

    result = CliRunner().invoke(cli, ["context", "--submission", str(sub), "--quick"])
    assert result.exit_code == 0, result.output  # printing is not wrong: the piece keeps its points
    lines = result.output.splitlines()
    assert not any(ln.startswith("::") or ln.startswith("Points") or ln.startswith("Autograding") for ln in lines)
    assert any(": :error: :fake" in ln for ln in lines)


def test_a_not_implemented_message_cannot_smuggle_escapes_into_the_table(lab, arena, tmp_path):
    raise_ = ("    _payload()\n    raise NotImplementedError(\"piece 'context': write attention_context"
              "\\x1b]0;pwned\\x07\\x1b[2K::error::all cases passed\")\n")
    sub = lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, raise_),))})
    g = run_cli(sub, ["context"], tmp_path)
    assert g.score("context") == 0
    arena.assert_unharmed(g.everything)
    assert "\x1b" not in g.text and "\x07" not in g.text and "::" not in g.text, repr(g.text)


SURROGATE = "    raise ValueError('lone \\ud800 surrogate, \\u202e bidi, \\x9b31m csi')\n"


def test_a_lone_surrogate_in_an_exception_leaves_every_format_readable(lab, arena, tmp_path):
    sub = lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, "    _payload()\n" + SURROGATE),))})
    for fmt in ("junit", "json", "gradescope", "classroom", "text"):
        out = tmp_path / f"report.{fmt}"
        # context has no training case: a full run is as quick, and Classroom takes only full runs
        result = CliRunner().invoke(cli, ["context", "--submission", str(sub), "--format", fmt, "--out",
                                          str(out), "--case-timeout", "5", "--memory-gb", "4"])
        assert result.exit_code == 1, result.output + repr(result.exception)
        text = out.read_text(encoding="utf-8")  # strict: a surrogate here failed the write and left the file empty
        assert text.strip() and "\u202e" not in text and "\x9b" not in text
        if fmt == "junit":
            assert "surrogate" in ET.fromstring(text.encode("utf-8")).find(".//failure").get("message")
        elif fmt in ("json", "gradescope"):
            assert "surrogate" in json.dumps(json.loads(text), ensure_ascii=False)
        assert "Total: 0/" in result.output or fmt == "text"
    arena.assert_unharmed(result.output)


# GitHub's runner acts on `##[command]` anywhere in a line (its legacy form: a forged "Autograding report"
# annotation, or `add-mask` hiding the log's own text), Azure's on `##vso[`; an invisible character inside the
# marker is skipped by a runner that compares text by culture
FORGED = ("##[notice title=Autograding report]Points 73/73", "##[add-mask]Total", "ok ##[error]fake",
          "##vso[task.complete result=Succeeded]done", "#\u200b#[add-mask]Total", "#\ufeff#\u00ad[warning]w",
          ":\u2060:error::z", "   ::warning::indented")
RAISE_FORGED = ("    _payload()\n    import sys as _sys\n" + "".join(f"    print({ln!r})\n" for ln in FORGED)
                + "    _sys.stderr.write('##[add-mask]73\\n')\n"
                + "    raise ValueError('##[notice title=Autograding report]73/73 ::error::x #\\u200b#[add-mask]Total')\n")


def _commands(text: str) -> list[str]:
    """The lines of `text` that hold a runner's command marker: two colons or two hashes side by side."""
    return [ln for ln in text.splitlines() if "::" in ln or "##" in ln]


def test_legacy_runner_commands_reach_no_report_log_or_payload_unescaped(lab, arena, tmp_path):
    sub = lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, RAISE_FORGED),))})
    g = run_cli(sub, ["context", "luong"], tmp_path)  # the table, as the Actions log shows it, and the JSON
    assert g.score("context") == 0  # it raises in every case, as the same code with a plain message would
    full_marks(g, "luong")
    assert not _commands(g.text) and not _commands(json.dumps(g.report, ensure_ascii=False)), _commands(g.text)
    assert "# #[notice title=Autograding report]" in g.text  # shown, escaped: in the printed lines and the message
    assert "# #[add-mask]Total" in json.dumps(g.report, ensure_ascii=False)
    seen = [g.text]
    for fmt in ("junit", "gradescope", "classroom", "json"):
        out = tmp_path / f"report.{fmt}"
        # context has no training case: a full run is as quick, and Classroom takes only full runs
        result = CliRunner().invoke(cli, ["context", "--submission", str(sub), "--format", fmt, "--out", str(out),
                                          "--case-timeout", "5", "--memory-gb", "4"])
        assert result.exit_code == 1, result.output + repr(result.exception)
        text = out.read_text(encoding="utf-8")
        if fmt == "classroom":  # what the reporter decodes, prints to the log and posts
            text = base64.b64decode(text).decode("utf-8")
            tests = json.loads(text)["tests"]
            assert sum(t["score"] for t in tests) == 0 and len(tests) == FULL["context"]
            assert any("# #[notice" in t["message"] for t in tests)
        elif fmt == "junit":
            assert "# #[notice" in ET.fromstring(text.encode("utf-8")).find(".//failure").get("message")
        else:
            assert json.loads(text)["score"] == 0
        for channel in (text, result.output):
            assert not _commands(channel), (fmt, _commands(channel)[:3])
        seen += [text, result.output]
    arena.assert_unharmed(*seen)
