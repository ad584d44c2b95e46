"""Issue 50 §1: no page-cache channel between two students graded on one machine. A sender's encoder.py leaves
PATTERN in which of torch's headers are cached; a receiver's additive.py keeps its points only where it reads
PATTERN back (tests/redteam/page_cache.py). Where nothing is dropped between them, it does (the control: the
channel is real on this machine); where the grader drops the page cache between them (before each wave of a batch,
before each push a self-hosted runner grades), the receiver reads noise and earns 0 of the additive's 13.
Root only: dropping the cache, and the control's clean start, need it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from grader.core import pagecache
from grader.core.pieces import PIECES
from grader.runner.results import Limits
from grader.verbs import batch as verb
from grader.verbs import classroom50 as release_verb

from helpers import REFERENCE, make_submission
from .page_cache import receiver, sender

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                                                   reason="dropping the page cache needs root on Linux")]
ADDITIVE = 13  # the additive piece's points


def batch_scores(tmp_path: Path, monkeypatch, names: dict[str, str]) -> dict[str, dict[str, int]]:
    """{student: {piece: score}} of `grade batch -j 1` (waves of two, in the names' order) over the encoder and the
    additive pieces, each student's role one of "sender", "receiver", "reference"."""
    monkeypatch.setattr(verb, "PIECES", {p: PIECES[p] for p in ("encoder", "additive")})
    klass = tmp_path / "class"
    for name, role in names.items():
        files = {"sender": {"encoder": sender()}, "receiver": {"additive": receiver()}}.get(role, {})
        make_submission(klass / name / "exercises", files=files)
    out = tmp_path / "out" / "grades.csv"
    assert pagecache.drop() is None  # nothing left by what ran before this test
    verb.main(submissions=[klass], out=out, reports=None, jobs=1, seed="page-cache", progress=False,
              limits=Limits(30, 120, 6, True))
    reports = {p.stem: json.loads(p.read_text()) for p in (out.parent / "grades-reports").glob("*.json")}
    return {name: {p["name"]: p["score"] for p in r["pieces"]} for name, r in reports.items()}


def test_a_receiver_in_the_senders_wave_hears_it_so_the_channel_is_real(tmp_path, monkeypatch):
    """The control: within one wave nothing is dropped (and none of this wave's workers holds a piece's reference
    before that piece's unit cases are done), so the bits pass."""
    got = batch_scores(tmp_path, monkeypatch, {"a-sender": "sender", "b-receiver": "receiver", "c-other": "reference"})
    assert got["b-receiver"]["additive"] == ADDITIVE, got


def test_a_receiver_in_a_later_wave_hears_nothing_the_cache_is_dropped_before_each_wave(tmp_path, monkeypatch):
    got = batch_scores(tmp_path, monkeypatch, {"a-sender": "sender", "b-other": "reference", "c-receiver": "receiver"})
    assert got["a-sender"]["encoder"] > 0 and got["b-other"]["additive"] == ADDITIVE, got
    assert got["c-receiver"]["additive"] == 0, got


@pytest.fixture(scope="module")
def keyed_release(tmp_path_factory) -> dict:
    """A Classroom 50 release and its seal key's file, as on a self-hosted runner."""
    base = tmp_path_factory.mktemp("pagecache")
    key = Fernet.generate_key()
    paths = release_verb.build(base / "out", classroom="fall26", assignment="attention-lab",
                               runs_on=("self-hosted", "attnlab"), key=key)
    (base / "seal-key").write_bytes(key + b"\n")
    return {"key_file": base / "seal-key", **paths}


def push(release: dict, tmp_path: Path, name: str, files: dict[str, str], piece: str, **env: str) -> dict:
    """One push graded as the runner's autograder grades it (the release's own boot.py, the key, the runner's
    environment), of one piece; its JSON report."""
    repo = tmp_path / name
    shutil.copytree(release["template"], repo)
    for module, text in files.items():
        (repo / "exercises" / f"{module}.py").write_text(text)
    shutil.copyfile(REFERENCE / "context.py", repo / "exercises" / "context.py")  # the additive's context
    report = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-I", str(release["bundle"] / "lab" / "grader" / "boot.py"), "--seal-key-file",
           str(release["key_file"]), "--submission", str(repo / "exercises"), "--format", "json", "--out", str(report),
           "--quick", piece]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
                               "RUNNER_ENVIRONMENT": "self-hosted", **env})
    assert report.is_file(), done.stderr[-3000:]
    return json.loads(report.read_text())


@pytest.mark.parametrize("fresh", [True, False], ids=["declared-fresh", "kept-machine"])
def test_a_push_after_a_senders_push_on_a_self_hosted_runner_hears_it_only_where_nothing_is_dropped(
        keyed_release, tmp_path, fresh):
    """A runner declared a new machine for every job (ATTNLAB_FRESH_RUNNER=1) drops nothing: on a machine that is
    in fact kept, the bits pass (the control); a kept runner's `grade` drops the cache first, and they do not."""
    env = {pagecache.FRESH_ENV: "1"} if fresh else {}
    assert pagecache.drop() is None
    push(keyed_release, tmp_path, "sender", {"encoder": sender()}, "encoder", **env)
    got = push(keyed_release, tmp_path, "receiver", {"additive": receiver()}, "additive", **env)
    assert got["score"] == (ADDITIVE if fresh else 0), got["pieces"][0]["cases"]
