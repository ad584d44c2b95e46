"""Which part of a class a shard grades: `--shard K/N`, or `--shard auto/N` under a job array.

A student's part depends only on the class list (the students' unique names) and N, never on the order the
folders were listed in or on the machine: the names are ranked by a hash of the name and dealt out in turn,
so the parts differ in size by one at most and a name lands in the same part on every run of that list.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

MAX_SHARDS = 10_000
# the engines' own index variables: a Slurm job array's task (any base, given its minimum) and a Kubernetes
# Indexed Job's completion index (0-based)
SLURM, KUBERNETES = "SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"


class ShardError(ValueError):
    """A --shard that names no part; str() is the one line the command prints."""


@dataclass(frozen=True)
class Shard:
    k: int  # 1-based
    n: int

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def parse(spec: str, env: dict[str, str] | None = None) -> Shard:
    """`K/N` with 1 <= K <= N, or `auto/N` with K from the job array's variables in `env` (os.environ)."""
    env = os.environ if env is None else env
    m = re.fullmatch(r"\s*(auto|\d+)\s*/\s*(\d+)\s*", spec)
    if not m:
        raise ShardError(f"--shard {spec!r} is not K/N: give the part and the number of parts, e.g. 3/10 "
                         "(or auto/10 in a Slurm job array or a Kubernetes Indexed Job)")
    n = int(m.group(2))
    if not 1 <= n <= MAX_SHARDS:
        raise ShardError(f"--shard {spec}: the number of parts must be 1 to {MAX_SHARDS}")
    k = _from_engine(env, n) if m.group(1) == "auto" else int(m.group(1))
    if not 1 <= k <= n:
        raise ShardError(f"--shard {spec}: the part must be 1 to {n} (parts are numbered from 1)")
    return Shard(k, n)


def _from_engine(env: dict[str, str], n: int) -> int:
    if env.get(SLURM, "").isdigit():
        count = env.get("SLURM_ARRAY_TASK_COUNT", "")
        if count.isdigit() and int(count) != n:
            raise ShardError(f"--shard auto/{n}, but this Slurm job array has {count} tasks: make them agree "
                             f"(--array with {n} indices, or --shard auto/$SLURM_ARRAY_TASK_COUNT)")
        low = env.get("SLURM_ARRAY_TASK_MIN", "")
        return int(env[SLURM]) - (int(low) if low.isdigit() else 0) + 1
    if env.get(KUBERNETES, "").isdigit():
        return int(env[KUBERNETES]) + 1
    raise ShardError(f"--shard auto/{n} takes the part from {SLURM} (a Slurm job array) or {KUBERNETES} (a "
                     "Kubernetes Indexed Job), and neither is set here: give the part itself, e.g. --shard 1/"
                     f"{n}")


def _rank(name: str) -> tuple[str, str]:
    return hashlib.sha256(name.encode()).hexdigest(), name


def assign(names: list[str], n: int) -> dict[str, int]:
    """Each name's part (1..n): ranked by hash and dealt in turn, so parts differ in size by one at most."""
    return {name: i % n + 1 for i, name in enumerate(sorted(set(names), key=_rank))}


def members(names: list[str], shard: Shard) -> list[str]:
    """The names of `shard`'s part, in the class list's order of names."""
    parts = assign(names, shard.n)
    return sorted((name for name in names if parts[name] == shard.k), key=lambda s: (s.lower(), s))


def class_digest(names: list[str]) -> str:
    """The class list's identity: the SHA-256 of its sorted unique names, one a line."""
    return hashlib.sha256("".join(f"{s}\n" for s in sorted(set(names))).encode()).hexdigest()
