"""The regrade's journal: every finished row with the digest of its inputs, appended and flushed as it finishes, so
that a rerun of a killed run grades only what is left (grader/regrade/digests.py says what the inputs are)."""
from __future__ import annotations

import json
import os
from pathlib import Path

MAX_JOURNAL = 256 << 20  # bytes read back at most: a class of thousands' rows, with room

class Journal:
    """Rows as they finish, one JSON object a line, with the digest of their inputs. A rerun with the same
    settings reads it back; with other settings (another seed, grader, shard) it starts a new one."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path, self.header = path, header
        self.done: dict[str, tuple[str, dict]] = {}
        kept = self._read()
        if kept is None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps({"header": header}, sort_keys=True) + "\n")
        else:
            self.done = kept
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close

    def _read(self) -> dict[str, tuple[str, dict]] | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read(MAX_JOURNAL).splitlines()
        except (OSError, UnicodeDecodeError):
            return None
        try:
            if json.loads(lines[0]) != {"header": json.loads(json.dumps(self.header, sort_keys=True))}:
                return None
        except (IndexError, ValueError):
            return None
        done = {}
        for text in lines[1:]:
            try:
                entry = json.loads(text)
                done[entry["row"]["student"]] = (entry["inputs"], entry["row"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by the kill: that student is graded again
        return done

    def reusable(self, name: str, inputs: str) -> dict | None:
        """The row of `name` if it was finished with these very inputs."""
        kept = self.done.get(name)
        return kept[1] if kept and kept[0] == inputs else None

    def append(self, row: dict, inputs: str) -> None:
        self.file.write(json.dumps({"inputs": inputs, "row": row}, sort_keys=True) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()
