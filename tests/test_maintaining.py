"""docs/maintaining.md's file table names every module of grader/, each in the row of its own folder: a module
added without a line there fails here."""
from __future__ import annotations

from pathlib import Path

from grader import ROOT

GRADER = ROOT / "grader"


def table_rows() -> list[str]:
    text = (ROOT / "docs" / "maintaining.md").read_text(encoding="utf-8")
    start = text.index("## Where things are, file by file")
    end = text.find("\n## ", start + 1)
    return [line for line in text[start:end if end > 0 else None].splitlines() if line.startswith("| `")]


def named_in(path: Path, rows: list[str]) -> bool:
    """Whether a row names it by its path, or the row of its folder by its name."""
    parts = path.relative_to(GRADER).parts
    if any(f"`{path.relative_to(ROOT).as_posix()}`" in row.split("|")[1] for row in rows):
        return True
    if len(parts) == 1:
        return False
    own = [row for row in rows if f"`grader/{parts[0]}/`" in row.split("|")[1]]
    inner = "/".join(parts[1:])
    spelled = {f"`{inner}`", f"`{parts[0]}/{inner}`"}
    if len(parts) > 2:  # a module of a subfolder: the subfolder named is enough
        spelled |= {f"`{parts[1]}/`", f"`{parts[0]}/{parts[1]}/`"}
    if parts[-1].startswith("test_"):  # the cases' and public checks' files: one per piece
        spelled |= {f"`{parts[0]}/test_<piece>.py`"}
    return any(s in row for row in own for s in spelled)


def test_every_module_of_the_grader_is_named_in_the_maintainers_file_table_in_its_folders_row():
    rows = table_rows()
    modules = [p for p in sorted(GRADER.rglob("*.py")) if "templates" not in p.parts and p.name != "__init__.py"]
    assert len(modules) > 60 and rows
    missing = [p.relative_to(ROOT).as_posix() for p in modules if not named_in(p, rows)]
    assert not missing, "docs/maintaining.md's table does not name: " + ", ".join(missing)
