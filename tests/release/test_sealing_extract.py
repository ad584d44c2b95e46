"""The sealed bundle is opened safely on every patch release of Python 3.10-3.13, with or without tarfile's `filter=`
(3.12+, backported to 3.10.12 and 3.11.4 only; Debian 12's 3.11.2 has none): the lab writes the members itself."""
from __future__ import annotations

import io
import tarfile

import pytest
from cryptography.fernet import Fernet

from grader import ROOT
from grader.runner import sealing


@pytest.fixture
def no_filter(monkeypatch):
    """tarfile as an old patch release has it: no data_filter, and extractall/extract refuse `filter=`."""
    for name in ("data_filter", "tar_filter", "fully_trusted_filter"):
        monkeypatch.delattr(tarfile, name, raising=False)
    plain_all, plain_one = tarfile.TarFile.extractall, tarfile.TarFile.extract

    def extractall(self, path=".", members=None, *, numeric_owner=False):
        return plain_all(self, path, members, numeric_owner=numeric_owner)

    def extract(self, member, path="", set_attrs=True, *, numeric_owner=False):
        return plain_one(self, member, path, set_attrs, numeric_owner=numeric_owner)

    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)
    monkeypatch.setattr(tarfile.TarFile, "extract", extract)


def packed(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_a_sealed_bundle_opens_on_a_python_whose_tarfile_has_no_filter(no_filter, tmp_path):
    key = Fernet.generate_key()
    sealing.unseal(sealing.seal({"reference/encoder.py": b"x = 1\n", "cases/a/b.py": b"y = 2\n"}, key), key, tmp_path)
    assert (tmp_path / "reference" / "encoder.py").read_bytes() == b"x = 1\n"
    assert (tmp_path / "cases" / "a" / "b.py").read_bytes() == b"y = 2\n"


@pytest.mark.parametrize("unsafe", [
    member("../outside.py"), member("a/../../outside.py"), member("/etc/outside.py"), member("C:/outside.py"),
    member("..\\outside.py"), member("link", tarfile.SYMTYPE, "/etc/passwd"), member("hard", tarfile.LNKTYPE, "x"),
    member("dev", tarfile.CHRTYPE), member("blk", tarfile.BLKTYPE), member("fifo", tarfile.FIFOTYPE),
], ids=["dotdot", "nested-dotdot", "absolute", "drive", "backslash", "symlink", "hardlink", "chardev", "blockdev",
        "fifo"])
@pytest.mark.parametrize("has_filter", [True, False], ids=["with-filter", "without-filter"])
def test_an_unsafe_member_is_refused_whether_or_not_tarfile_has_a_filter(unsafe, has_filter, request, tmp_path):
    if not has_filter:
        request.getfixturevalue("no_filter")
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(sealing.SealError, match="unsafe member"):
        sealing.extract(packed((member("ok.py"), b"fine\n"), (unsafe, b"bad\n")), into)
    assert not (tmp_path / "outside.py").exists() and not any(p.name != "ok.py" for p in into.rglob("*"))


def test_a_member_written_twice_is_refused_rather_than_overwritten(tmp_path):
    with pytest.raises(sealing.SealError, match="could not be opened"):
        sealing.extract(packed((member("a.py"), b"first\n"), (member("a.py"), b"second\n")), tmp_path)
    assert (tmp_path / "a.py").read_bytes() == b"first\n"


def test_no_module_of_the_lab_leaves_an_archive_to_extractall():
    """The one tar the lab opens goes through sealing.extract; zips (intake, the wire) are read member by member."""
    users = [str(p.relative_to(ROOT)) for p in (ROOT / "grader").rglob("*.py")
             if "extractall(" in p.read_text(encoding="utf-8") or "unpack_archive(" in p.read_text(encoding="utf-8")]
    assert users == []
