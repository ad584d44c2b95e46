"""Secrets: the seal key and the host's environment stay out of reach of graded code."""
from __future__ import annotations

import json
import os
import secrets

import pytest

from helpers import QUICK

from .harness import KEY_HUNT, full_marks, hostile, judge, run_cli

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


@pytest.mark.parametrize("via", ["cli", "api"])
def test_the_seal_key_is_out_of_reach_of_graded_code(lab, arena, tmp_path, monkeypatch, via):
    key = "redteam-" + secrets.token_hex(16)
    monkeypatch.setenv("ATTNLAB_SEAL_KEY", key)
    sub = lab(files={"context": hostile("context", arena, top=KEY_HUNT, call="_payload()\n_hunt('call')\n")})
    if via == "cli":
        g = run_cli(sub, ["context"], tmp_path)
    else:
        g = judge(sub, ["context"], fresh=True)  # a judge_server started after the key was set
    full_marks(g, "context")
    assert "KEY-FOUND" not in g.everything and key not in g.everything
    arena.assert_unharmed(g.everything)


def test_a_worker_sees_no_host_secret_in_its_environment(lab, arena, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_attnlab_canary_token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "attnlab-canary-aws")
    probe = 'import os as _o\nprint("ENV " + repr(sorted(_o.environ)))\nraise RuntimeError(repr(dict(_o.environ)))'
    sub = lab(files={"context": hostile("context", arena, end=probe)})
    g = judge(sub, ["context"], QUICK, fresh=True)  # a fresh grade: its worker server starts under this environment
    assert "canary" not in g.everything
    names = eval(next(ln for ln in g.output.splitlines() if "ENV " in ln).split("ENV ", 1)[1])  # noqa: S307
    assert not {"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "HOME", "USER"} & set(names), names
    assert json.dumps(g.report)  # the report is still a report
    assert os.environ["GITHUB_TOKEN"]  # the grader's own environment is untouched
