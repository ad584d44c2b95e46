"""The toy task's committed splits as the grader reads them: only if they are the ones the lab was released with.

In a Classroom repository `datasets/` is the student's to change (only `grader/` and `.github/` are protected),
so the grader trains and tests on a split only when its SHA-256 is the one below; `grader.lab.toy.write_splits`
regenerates the files, and a test keeps these digests equal to what the generator writes.
"""
from __future__ import annotations

import hashlib

from grader import ROOT

DATA_DIR = ROOT / "datasets" / "toy_translation"
DIGESTS = {
    "train": "c004a3a46e6dda2aa2ed79ffc6ffa854e8234152572af9b15c99f6f3ad8b3d5e",
    "valid": "4fa1c4b7c1eac5fb37723b0d2b5aabd9f82799a2938c72d981e0f0b27f1b2396",
    "test": "dd7e6599a481a58c7671c4b288455fd2123c92025872b6b32a924a3015d5a310",
}


class DataChanged(Exception):
    """A split is missing or is not the released one; str() says which and what to do."""


def split_text(split: str) -> str:
    """The split's text, checked against its released digest."""
    path = DATA_DIR / f"{split}.tsv"
    where = f"datasets/toy_translation/{split}.tsv"
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DataChanged(f"{where} cannot be read ({e.strerror}); restore the lab's datasets/ folder "
                          "(git checkout -- datasets/) and grade again") from None
    if hashlib.sha256(data).hexdigest() != DIGESTS[split]:
        raise DataChanged(f"{where} is not the lab's own (its SHA-256 differs): the grader trains and tests on the "
                          "released data only. Restore it (git checkout -- datasets/) and grade again")
    return data.decode("utf-8")


def verify() -> None:
    """Raise DataChanged unless every split is the released one."""
    for split in DIGESTS:
        split_text(split)
