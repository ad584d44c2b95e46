"""Files that are not what they seem (links to the reference, FIFOs, devices, folders, zip bombs), and files
the worker must not change."""
from __future__ import annotations

import csv
import os
import stat
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.verbs import batch as batch_verb
from grader.cli import cli
from grader.core.pieces import PIECES

from helpers import REFERENCE

from .harness import FULL, each_refused, full_marks, hostile, judge, run_cli

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


def test_a_symlink_to_the_reference_scores_nothing_via_the_cli(lab, arena, tmp_path):
    sub = lab()
    (sub / "additive.py").unlink()
    (sub / "additive.py").symlink_to(REFERENCE / "additive.py")
    g = run_cli(sub, ["additive", "context"], tmp_path)
    assert g.score("additive") == 0
    assert all("link" in m for m in g.messages("additive").values()), g.messages("additive")
    full_marks(g, "context")
    arena.assert_unharmed(g.everything)


def test_a_symlink_to_the_reference_scores_nothing_in_a_batch(lab, arena, tmp_path, monkeypatch):
    sub = lab()
    (sub / "additive.py").unlink()
    (sub / "additive.py").symlink_to(REFERENCE / "additive.py")
    monkeypatch.setattr(batch_verb, "PIECES", {p: PIECES[p] for p in ("additive", "context")})
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(sub), "-j", "1", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(out.open()))
    assert row["status"] == "ok" and row["additive"] == "0" and int(row["context"]) == FULL["context"], row
    arena.assert_unharmed((tmp_path / "grades-reports" / f"{sub.name}.json").read_text())


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless if anything reads it


def _folder(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("make", [
    pytest.param(_fifo, id="a FIFO"),
    pytest.param(_device, id="a device"),
    pytest.param(_folder, id="a folder"),
])
def test_a_special_file_in_place_of_a_piece_costs_that_piece(lab, arena, make):
    sub = lab()
    (sub / "context.py").unlink()
    make(sub / "context.py")
    start = time.monotonic()
    g = judge(sub, ["context", "luong"])
    assert time.monotonic() - start < 30  # nothing blocked on the FIFO or read /dev/zero forever
    assert g.score("context") == 0 and all(g.messages("context").values())
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_a_zip_bomb_is_not_unpacked_in_full(tmp_path):
    bomb = tmp_path / "mallory.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mallory/encoder.py", "#" + " " * (20 * 2**20))  # 20 MB of spaces: a 20 KB zip
        zf.writestr("mallory/context.py", (REFERENCE / "context.py").read_text())
    assert bomb.stat().st_size < 2**20
    into = tmp_path / "into"
    into.mkdir()
    staged = batch_verb.unpack(bomb, into)
    assert not (staged / "encoder.py").exists()  # stage refuses it, but only after it was written out in full
    written = sum(p.stat().st_size for p in into.rglob("*") if p.is_file())
    assert written <= 4 * 2**20, f"{written / 2**20:.0f} MB written to unpack a {bomb.stat().st_size // 1024} KB zip"


def test_a_piece_cannot_change_file_metadata(lab, arena, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    victim.chmod(0o640)
    os.utime(victim, (1_000_000_000, 1_000_000_000))
    before = victim.stat()
    call = each_refused(f"_os.chmod({str(victim)!r}, 0o777)", f"_os.utime({str(victim)!r}, (0, 0))",
                        f"_os.chown({str(victim)!r}, 65534, 65534)", f"_os.setxattr({str(victim)!r}, 'user.pwned', b'1')")
    g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
    full_marks(g, "context", "luong")
    arena.assert_unharmed(g.everything)
    after = victim.stat()
    assert (after.st_mode, after.st_mtime, after.st_uid, after.st_gid) == (before.st_mode, before.st_mtime,
                                                                         before.st_uid, before.st_gid)
    assert victim.read_text() == "untouched\n"
