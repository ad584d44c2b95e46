"""The one record of measured times and counts (grader/core/measured.json, written by `python bench/record.py`): what the
command line announces and what docs/measured.md shows are read from it, each figure with where and when it was
measured, so no announced time is one nobody measured."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

RECORD = Path(__file__).with_name("measured.json")


@lru_cache(maxsize=1)
def record() -> dict:
    """{name: {"value", "unit", "what", "machine", "date", "commit", "command"}}; {} where the file is missing."""
    try:
        return json.loads(RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def seconds(name: str) -> str:
    """"7.9 s" for a recorded time, "" where none is recorded."""
    entry = record().get(name)
    return f"{entry['value']:g} s" if entry else ""


def where(name: str) -> str:
    """"on a 2-core AMD EPYC (AVX-512), 2026-12-06": the machine and date a figure was measured on."""
    entry = record().get(name)
    return f"on {entry['machine']}, {entry['date']}" if entry else ""
