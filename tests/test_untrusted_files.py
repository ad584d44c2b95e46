"""One reader for a student's file (grader.core.files.read_untrusted), and the words each of its callers gives a
refusal: staging, the notebook's combine, the workers' sources, the plots and the regrade."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from grader.core import files
from grader.core.files import LINK, MISSING, NOT_REGULAR, TOO_BIG, Refused, read_regular, read_untrusted
from grader.judge.sources import student_sources
from grader.lesson import notebook
from grader.runner.stage import MAX_FILE, REFUSED, stage

from helpers import REFERENCE

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFO on this OS")


def test_a_regular_file_is_read_up_to_its_cap_and_refused_past_it(tmp_path):
    (tmp_path / "a.py").write_bytes(b"x = 1\r\n")
    assert read_untrusted(tmp_path / "a.py", 7) == files.Read(b"x = 1\r\n")
    assert read_untrusted(tmp_path / "a.py", 6).refused == TOO_BIG
    assert files.untrusted_text(read_untrusted(tmp_path / "a.py", 7)) == "x = 1\n"  # as Path.read_text reads it


def test_a_missing_file_a_link_and_a_folder_are_each_refused_with_their_reason(tmp_path):
    (tmp_path / "real.py").write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "folder.py").mkdir()
    assert read_untrusted(tmp_path / "nowhere.py", MAX_FILE).refused == MISSING
    assert read_untrusted(tmp_path / "link.py", MAX_FILE).refused == LINK
    assert read_untrusted(tmp_path / "dangling.py", MAX_FILE).refused == LINK
    assert read_untrusted(tmp_path / "folder.py", MAX_FILE).refused == NOT_REGULAR
    assert read_untrusted(tmp_path / "link.py", MAX_FILE).data is None


def test_a_link_put_there_after_the_check_is_still_not_followed(tmp_path, monkeypatch):
    (tmp_path / "real.py").write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    monkeypatch.setattr(files, "is_link", lambda path: False)  # the race: O_NOFOLLOW alone must refuse it
    assert read_untrusted(tmp_path / "link.py", MAX_FILE).refused == LINK


@needs_fifo
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "fifo.py")
    start = time.monotonic()
    assert read_untrusted(tmp_path / "fifo.py", MAX_FILE).refused == NOT_REGULAR
    assert time.monotonic() - start < 5


@needs_fifo
def test_staging_words_each_refusal_for_the_pieces_cases(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "encoder.py").write_text("x = 1\n")
    (sub / "additive.py").symlink_to(REFERENCE / "additive.py")
    (sub / "context.py").mkdir()
    os.mkfifo(sub / "decoder.py")
    (sub / "luong.py").write_bytes(b"#" * (MAX_FILE + 1))
    staged = stage(sub, tmp_path / "into")
    assert sorted(p.name for p in staged.iterdir()) == [REFUSED, "encoder.py"]  # evaluation.py missing: no word
    refused = json.loads((staged / REFUSED).read_text())
    assert refused == {
        "additive.py": "additive.py is a symbolic link; the grader reads only regular files: put the file itself there",
        "context.py": "context.py is not a regular file; the grader reads only regular files: put the file itself there",
        "decoder.py": "decoder.py is not a regular file; the grader reads only regular files: put the file itself there",
        "luong.py": "luong.py is over 1024 KB; a piece is a few kilobytes of Python",
    }


def test_the_regrade_keeps_its_own_words_for_a_refused_file(tmp_path):
    (tmp_path / "link.py").symlink_to(REFERENCE / "context.py")
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "big.py").write_bytes(b"#" * 11)
    with pytest.raises(Refused, match="is a symbolic link; the regrade reads only real files"):
        read_regular(tmp_path / "link.py", MAX_FILE, "link.py")
    with pytest.raises(Refused, match="folder.py is not a regular file; hand in the file itself"):
        read_regular(tmp_path / "folder.py", MAX_FILE, "folder.py")
    with pytest.raises(Refused, match=r"gone.py cannot be read \(No such file or directory\)"):
        read_regular(tmp_path / "gone.py", MAX_FILE, "gone.py")
    assert read_regular(tmp_path / "big.py", 10, "big.py") is None


def test_combining_carries_a_link_a_folder_and_a_big_file_so_staging_refuses_each_as_it_would_the_original(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    (src / "link.py").symlink_to(REFERENCE / "context.py")
    (src / "folder.py").mkdir()
    (src / "big.py").write_bytes(b"x" * (MAX_FILE + 5))
    (src / "plain.py").write_text("x = 1\n")
    for name in ("link.py", "folder.py", "big.py", "plain.py", "gone.py"):
        notebook._carry(src / name, dest / name)
    assert (dest / "link.py").is_symlink() and (dest / "folder.py").is_dir()
    assert (dest / "big.py").stat().st_size == MAX_FILE + 1 and (dest / "plain.py").read_text() == "x = 1\n"
    assert not os.path.lexists(dest / "gone.py")
    assert notebook._regular_text(src / "link.py") is None and notebook._regular_text(src / "plain.py") == "x = 1\n"


def test_a_workers_sources_skip_a_linked_module_as_a_missing_one(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "context.py").write_text("x = 1\r\n")
    (sub / "encoder.py").symlink_to(REFERENCE / "encoder.py")
    got = dict(student_sources(sub, None, "context", ["encoder", "context"]))
    assert got["context"] == "x = 1\n"
    assert "encoder" not in got
    linked = dict(student_sources(sub, None, "encoder", ["encoder"]))
    assert linked == {"encoder": ""}  # the piece's own file, refused, loads as empty: its cases fail


def test_the_plots_stand_the_reference_in_for_a_linked_piece(tmp_path, monkeypatch):
    from grader.plots import models

    for stem in models.LOADED:
        (tmp_path / f"{stem}.py").write_text((REFERENCE / f"{stem}.py").read_text())
    linked = models.LOADED[0]
    (tmp_path / f"{linked}.py").unlink()
    (tmp_path / f"{linked}.py").symlink_to(Path(REFERENCE / f"{linked}.py"))
    texts, own, notes = models._files(tmp_path, {})
    assert linked not in own and set(own) == set(models.LOADED) - {linked}
    assert notes == [f"{linked}.py is missing; the plots use the reference {linked}"]
