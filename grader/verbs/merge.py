"""`grade batch merge PARTS...`: the shards' parts of a class regrade made one gradebook.

The parts must be every shard of one run: the same class list, grader, cases, seed and settings, each shard
once and finished, each student in the shard the class list puts them in. Anything else is refused with one
line a problem, and a missing shard is named with its students so that only it is rerun. The merged CSV is
the one an unsharded `grade batch` of the class writes, byte for byte (the same rows, book.write_csv).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from grader.regrade import book
from grader.regrade.manifests import MergeError, find, load, write_manifest
from grader.regrade.rowstatus import status_of
from grader.regrade.shard import assign

COMPARED = {"class": "class list", "grader": "grader", "cases": "hidden cases or reference", "seed": "seed",
            "mode": "mode (--quick)", "limits": "limits", "pieces": "pieces", "before": "deadline (--before)",
            "release": "release (--release)", "format": "manifest format"}
SHOWN = 20  # students named for a missing shard, before "and N more"


def check(manifests: dict[Path, dict]) -> list[str]:
    """Every reason the manifests are not one run's complete set of shards, one line each."""
    problems: list[str] = []
    (first, base), *_ = manifests.items()
    for path, m in manifests.items():
        if not m.get("shard"):
            problems.append(f"{path} is an unsharded run's, not a shard's: it is a gradebook already")
        if not m.get("finished"):
            problems.append(f"{path} is of a shard that did not finish ({len(m['students'])} graded): rerun shard "
                            f"{_shard(m)}; it resumes where it stopped")
        for key, what in COMPARED.items():
            ours = m["class"]["digest"] if key == "class" else m.get(key)
            theirs = base["class"]["digest"] if key == "class" else base.get(key)
            if ours != theirs:
                problems.append(f"{path} is of another {what} than {first}: merge the parts of one run")
        if m.get("shard") and base.get("shard") and m["shard"][1] != base["shard"][1]:
            problems.append(f"{path} is shard {_shard(m)} and {first} shard {_shard(base)}: merge the parts of "
                            "one run (the same N)")
    if problems:
        return problems
    n = base["shard"][1]
    names = base["class"]["students"]
    parts = assign(names, n)
    given: dict[int, Path] = {}
    seen: dict[str, Path] = {}
    for path, m in manifests.items():
        k = m["shard"][0]
        if k in given:
            problems.append(f"shard {k}/{n} is given twice: {given[k]} and {path}")
            continue
        given[k] = path
        for name, entry in m["students"].items():
            row = entry.get("row") if isinstance(entry, dict) else None
            if not isinstance(row, dict) or row.get("student") != name:  # a row is merged under its own name only
                problems.append(f"{path} holds a row for {name} that is not {name}'s: rerun shard {k}/{n}")
            if name in seen:
                problems.append(f"student {name} is in two shards: {seen[name]} and {path}")
            elif parts.get(name) != k:
                problems.append(f"{path} (shard {k}/{n}) holds {name}, whom the class list puts in shard "
                                f"{parts.get(name, 'none')}/{n}: rerun that shard")
            seen[name] = path
    for k in range(1, n + 1):
        if k not in given:
            who = sorted((s for s, p in parts.items() if p == k), key=lambda s: (s.lower(), s))
            shown = ", ".join(who[:SHOWN]) + (f" and {len(who) - SHOWN} more" if len(who) > SHOWN else "")
            problems.append(f"shard {k}/{n} is missing: its students are {shown or 'none'}; rerun it alone "
                            f"(grade batch ... --shard {k}/{n})")
    for k, path in given.items():
        lacking = [s for s, p in parts.items() if p == k and s not in manifests[path]["students"]]
        if lacking:
            problems.append(f"{path} (shard {k}/{n}) lacks {', '.join(lacking[:SHOWN])}: rerun shard {k}/{n}")
    return problems


def _inside(manifest: Path, name: str) -> Path:
    """A folder the manifest names beside itself: never one elsewhere (a part is an artifact: data, not a path)."""
    rel = Path(str(name))
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise MergeError(f"{manifest} names its reports or code at {name!r}, outside its own folder: rerun that shard "
                         "with its reports beside its CSV")
    return manifest.parent / rel


def _shard(m: dict) -> str:
    return "/".join(map(str, m["shard"])) if m.get("shard") else "none"


def main(*, parts: list[Path], out: Path, progress: bool = True, known: list[Path] = ()) -> tuple[int, int, str]:
    """Merge the parts into `out` and its companions (reports, code, manifest, class and similarity reports, the
    latter with the `known` sources beside the reference: grader.regrade.book.class_reports); returns (graded,
    unreadable, what the class reports wrote)."""
    paths = find(parts)
    if not paths:
        raise MergeError("no parts given")
    manifests: dict[Path, dict] = {}
    for path in paths:
        key = path.resolve()
        if key in manifests:
            raise MergeError(f"{path} is given twice")
        manifests[key] = load(path)
    problems = check(manifests)
    if problems:
        raise MergeError("\n".join(problems))
    files = book.Files.of(out)
    files.csv.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for path, m in sorted(manifests.items(), key=lambda item: item[1]["shard"][0]):
        rows += [entry["row"] for entry in m["students"].values()]
        for source, dest in ((_inside(path, m["reports"]), files.reports), (_inside(path, m["code"]), files.code)):
            if source.resolve() != dest.resolve() and source.is_dir():
                shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)  # a link is copied, never followed
    base = next(iter(manifests.values()))
    book.write_csv(files.csv, rows, base["mode"], list(base["pieces"]))
    setting = {k: base[k] for k in ("grader", "cases", "seed", "mode", "limits", "pieces", "before", "release")}
    write_manifest(files, shard=None, names=base["class"]["students"], class_digest=base["class"]["digest"],
                        setting=setting, rows=rows, finished=True)
    said = book.class_reports(files, rows, progress, mode=base["mode"], known=known)
    bad = sum(status_of(r).is_error for r in rows)
    return len(rows) - bad, bad, said
