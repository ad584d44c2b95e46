"""A regrade run's manifest beside its gradebook (what run it was, every student's row and how it ended), and the
merge's side of it: finding a sharded run's manifests and loading one."""
from __future__ import annotations

import json
import os
from pathlib import Path

from grader.regrade.book import Files, order
from grader.regrade.rowstatus import status_of

FORMAT = 1
MAX_MANIFEST = 256 << 20  # bytes: a class of thousands' rows, with room


def write_manifest(files: Files, *, shard: tuple[int, int] | None, names: list[str], class_digest: str,
                   setting: dict, rows: list[dict] | None, finished: bool, resumed: int = 0,
                   roster: dict[str, dict] | None = None) -> None:
    """The manifest of a run (rows None: still running); `roster`: its students' roster details (username, names,
    email, section, order), for the Classroom 50 scores.csv a merge writes."""
    data = {
        "format": FORMAT,
        "shard": list(shard) if shard else None,
        "class": {"digest": class_digest, "students": sorted(names)},
        **setting,
        "finished": finished,
        "gradebook": files.csv.name,
        "reports": os.path.relpath(files.reports, files.manifest.parent),
        "code": files.code.name,
        "resumed": resumed,
        "students": {r["student"]: {"ended": status_of(r).ended, "row": r} for r in order(rows or [])},
    }
    if roster is not None:
        data["roster"] = roster
    tmp = files.manifest.with_name(files.manifest.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, files.manifest)


class MergeError(Exception):
    """The parts do not make one gradebook; str() is one line a problem."""


def find(parts: list[Path]) -> list[Path]:
    """The manifests the parts name: a shard's CSV (its manifest beside it), a folder holding one (an
    artifact's folder), or a folder of such folders."""
    found: list[Path] = []
    for part in parts:
        if part.is_file():
            found.append(Files.of(part).manifest)
            continue
        here = sorted(part.glob("*-manifest.json"))
        found += here or sorted(part.glob("*/*-manifest.json"))
        if not here and not any(part.glob("*/*-manifest.json")):
            raise MergeError(f"{part} holds no shard's manifest (*-manifest.json): give the folders or CSVs that "
                             "`grade batch --shard K/N` wrote")
    return found


def load(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read(MAX_MANIFEST))
        data["class"]["digest"], data["students"]  # noqa: B018 - the keys every manifest has
    except FileNotFoundError:
        raise MergeError(f"{path} is missing: the shard's CSV was given without the manifest its run writes beside "
                         "it") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise MergeError(f"{path} is not a shard's manifest ({type(e).__name__}): rerun that shard") from None
    return data
