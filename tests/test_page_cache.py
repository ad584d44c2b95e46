"""grader.core.pagecache: the page cache dropped between two students, directly as root or through the helper an
instructor installs (SETUP.md), and a keyed `grade` on a self-hosted runner that posts no score where it cannot
drop it. tests/redteam/test_page_cache.py shows the channel it closes."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader.core import pagecache
from grader.regrade import staging
from grader.runner import layout
from grader.verbs import grade as grade_verb

root_only = pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                               reason="a helper only root may write is a file root owns")


@pytest.fixture
def no_direct_drop(tmp_path, monkeypatch) -> Path:
    """/proc/sys/vm/drop_caches unwritable (a folder stands in its place), a stand-in `sudo -n` first on PATH, and a
    helper that records its run; returns the file it writes."""
    monkeypatch.setattr(pagecache, "DROP_CACHES", str(tmp_path))
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "sudo").write_text('#!/bin/sh\n[ "$1" = "-n" ] || exit 1\nshift\nexec "$@"\n')
    (bin_ / "sudo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    ran = tmp_path / "dropped"
    helper = tmp_path / "attnlab-drop-caches"
    helper.write_text(f"#!/bin/sh\necho 3 > {ran}\n")
    helper.chmod(0o755)
    monkeypatch.setattr(pagecache, "HELPER", str(helper))
    return ran


@root_only
def test_without_write_access_the_cache_is_dropped_through_the_helper_with_sudo_n(no_direct_drop):
    assert pagecache.drop() is None
    assert no_direct_drop.read_text() == "3\n"


@root_only
def test_a_helper_others_may_write_is_never_run(no_direct_drop):
    Path(pagecache.HELPER).chmod(0o775)  # its group could put their code where root runs it
    why = pagecache.drop()
    assert why and "only root may write" in why and not no_direct_drop.exists()


def test_without_a_helper_it_says_where_setup_installs_one(no_direct_drop, monkeypatch, tmp_path):
    monkeypatch.setattr(pagecache, "HELPER", str(tmp_path / "none"))
    why = pagecache.drop()
    assert why and "SETUP.md installs it" in why and str(tmp_path) in why


@pytest.fixture
def keyed_self_hosted(monkeypatch) -> list[int]:
    """A keyed run (the sealed cases opened) on a self-hosted runner; returns the count of drops tried."""
    sealed = layout.Layout(Path("cases"), Path("reference"), Path("manifest.json"), sealed=True)
    monkeypatch.setattr(layout, "current", lambda: sealed)
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "self-hosted")
    monkeypatch.delenv(pagecache.FRESH_ENV, raising=False)
    tried: list[int] = []
    monkeypatch.setattr(pagecache, "drop", lambda: tried.append(1) or "no way to drop here")
    return tried


def test_a_keyed_run_on_a_self_hosted_runner_that_cannot_drop_the_cache_posts_no_score(keyed_self_hosted):
    said = grade_verb.page_cache_kept()
    assert said and "No score is posted" in said and "no way to drop here" in said and keyed_self_hosted == [1]


def test_a_runner_declared_fresh_or_hosted_or_a_public_run_drops_nothing(keyed_self_hosted, monkeypatch):
    monkeypatch.setenv(pagecache.FRESH_ENV, "1")
    assert grade_verb.page_cache_kept() is None
    monkeypatch.delenv(pagecache.FRESH_ENV)
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "github-hosted")  # a new VM every job
    assert grade_verb.page_cache_kept() is None
    assert keyed_self_hosted == []


def test_the_helper_setup_installs_is_the_one_the_grader_runs():
    setup = (Path(grade_verb.__file__).parents[1] / "templates" / "classroom50" / "SETUP.md").read_text()
    assert pagecache.HELPER in setup and "echo 3 > /proc/sys/vm/drop_caches" in setup
    assert pagecache.FRESH_ENV in setup


def test_a_batch_drops_the_cache_before_each_wave_and_says_so_once(monkeypatch, capsys):
    tried: list[int] = []
    monkeypatch.setattr(pagecache, "drop", lambda: tried.append(1))
    cache = staging.WaveCache(progress=True)
    for _ in range(3):
        cache.drop()
    assert len(tried) == 3 and cache.wave(4, 15) == 4
    assert capsys.readouterr().err.count("page cache dropped before each wave") == 1


def test_where_the_cache_cannot_be_dropped_the_batch_is_one_wave_and_says_why(monkeypatch, capsys):
    """Then no worker that holds a piece's reference runs before every student's unit cases of that piece ended."""
    tried: list[int] = []
    monkeypatch.setattr(pagecache, "drop", lambda: tried.append(1) or "Permission denied")
    cache = staging.WaveCache(progress=True)
    for _ in range(3):
        cache.drop()
    assert tried == [1] and cache.wave(4, 15) == 15 and cache.wave(4, 0) == 1
    err = capsys.readouterr().err
    assert err.count("page cache kept (Permission denied)") == 1 and "one wave" in err
