"""The red-team harness: small hostile submissions, written as a student trying to cheat or to do harm would.

Each case is the reference with hostile code added to one piece's file. It checks that the attacked
piece earns no more than honest code with the same visible behaviour, that its neighbour keeps full
marks, that grading ends with a report, that nothing was written, spawned or signalled (every hostile
file carries `_payload`, which tries all three against a marker under tmp_path and a sentinel
`sleep`), and that no line of a hidden case or of the reference reaches the report.

The `arena` fixture (redteam/conftest.py) builds an Arena; `hostile` writes the file, `judge`, `run_cli`
and `run_batch` grade it, `full_marks`, `only_wrong_values` and `Arena.assert_unharmed` check the outcome.
"""
from __future__ import annotations

import csv
import functools
import json
import re
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent, indent

from click.testing import CliRunner

from grader import ROOT
from grader.verbs import batch as batch_verb
from grader.runner.schedule import grade
from grader.runner.stage import stage
from grader.cli import cli
from grader.core.pieces import PIECES
from grader.runner.report import as_dict, to_text
from grader.runner.results import Limits

from helpers import QUICK, REFERENCE, shared_judge_server

EXERCISES = ROOT / "exercises"
CASES = ROOT / "grader" / "cases"
LOOSE = Limits(case_timeout=2, piece_timeout=60, memory_gb=4, quick=True)
MANIFEST = json.loads((CASES / "manifest.json").read_text())
FULL = {p: sum(c["points"] for c in cases if not c["slow"]) for p, cases in MANIFEST.items()}  # quick maximum
CONTEXT_SOLUTION = ("    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)"
                    "  # (B, 1, T) @ (B, T, H) -> (B, H)\n")
ZEROS = "    return encoder_outputs.new_zeros(alpha.size(0), encoder_outputs.size(-1))\n"  # right shape, worth nothing
EDGE_B1 = "test_it_handles_edge_sizes[B=1]"  # the only context case whose batch has one sentence


@functools.cache
def secret_lines() -> frozenset[str]:
    """Distinctive lines (stripped, >= 25 characters) of the hidden cases and the reference that no stub shows."""
    public = {ln.strip() for p in EXERCISES.glob("*.py") for ln in p.read_text().splitlines()}
    found = set()
    for path in [*CASES.glob("*.py"), *REFERENCE.glob("*.py")]:
        for line in path.read_text().splitlines():
            s = line.strip()
            # a case's name (a needs marker's line) is no secret: every report names the cases
            if len(s) >= 25 and s not in public and not re.fullmatch(r'"test_\w+",?\)?', s):
                found.add(s)
    return frozenset(found)


def leaked(text: str) -> list[str]:
    return sorted(line for line in secret_lines() if line in text)


# ---- the arena: a marker the hostile code must not create, a sentinel it must not signal ----

PRELUDE = '''
import os as _os
import signal as _signal
import subprocess as _subprocess

MARK = {mark!r}
SENTINEL = {sentinel}
LAB = {lab!r}


def _payload():
    """Write, spawn and signal: every hostile file tries all three, quietly."""
    for attempt in (
        lambda: open(MARK + ".open", "w").write("pwned"),
        lambda: _os.close(_os.open(MARK + ".osopen", _os.O_CREAT | _os.O_WRONLY, 0o644)),
        lambda: _subprocess.run(["touch", MARK + ".subprocess"], timeout=5),
        lambda: _os.system("touch " + MARK + ".system"),
        lambda: _os.posix_spawn("/bin/sh", ["sh", "-c", "touch " + MARK + ".spawn"], {{}}),
        lambda: _os.kill(SENTINEL, _signal.SIGKILL),
    ):
        try:
            attempt()
        except BaseException:
            pass
'''


@dataclass
class Arena:
    marks: Path
    sentinel: subprocess.Popen

    @property
    def mark(self) -> Path:
        return self.marks / "m"

    def prelude(self) -> str:
        return PRELUDE.format(mark=str(self.mark), sentinel=self.sentinel.pid, lab=str(ROOT))

    def assert_unharmed(self, *texts: str) -> None:
        assert sorted(p.name for p in self.marks.iterdir()) == [], "the hostile code wrote or spawned something"
        assert self.sentinel.poll() is None, "the hostile code signalled the sentinel process"
        for text in texts:
            assert not leaked(text), f"hidden lines reached the report: {leaked(text)[:3]}"


def hostile(piece: str, arena: Arena, *, top: str = "", call: str = "", end: str = "",
            edits: tuple[tuple[str, str], ...] = (), base: Path = REFERENCE) -> str:
    """`base`'s file for `piece`, with the prelude and `top` after `import torch`, `call` at the start of
    every solution block, `end` at the bottom (run at import), and text `edits`."""
    text = (base / f"{piece}.py").read_text()
    for old, new in edits:
        assert old in text, f"edit target not in {piece}.py: {old!r}"
        text = text.replace(old, new)
    assert "import torch\n" in text
    text = text.replace("import torch\n", "import torch\n" + arena.prelude() + "\n" + dedent(top) + "\n", 1)
    if call:
        marker = "### BEGIN SOLUTION" if base == REFERENCE else "raise NotImplementedError"
        text = re.sub(rf"^( *){re.escape(marker)}.*\n", lambda m: m.group(0) + indent(dedent(call), m.group(1)),
                      text, flags=re.M)
    if end:
        text += "\n" + dedent(end) + "\n"
    compile(text, f"{piece}.py", "exec")  # a typo here would pass for a blocked attack
    return text


def each_refused(*attempts: str) -> str:
    """A `call` that runs the payload, then tries each statement in turn, going on past the jail's OSError."""
    return "_payload()\n" + "".join(f"try:\n    {a}\nexcept OSError:\n    pass\n" for a in attempts)


def stealing_context(arena: Arena, steal: str, top: str = "") -> str:
    """A context.py whose answer is whatever `_steal(alpha, encoder_outputs)` finds, else zeros (worth nothing)."""
    body = "    _payload()\n    got = _steal(alpha, encoder_outputs)\n    if got is not None:\n        return got\n" + ZEROS
    top = dedent(top) + "\n\ndef _steal(alpha, encoder_outputs):\n" + indent(dedent(steal), "    ")
    return hostile("context", arena, top=top, edits=((CONTEXT_SOLUTION, body),))


# ---- grading ----

@dataclass
class Graded:
    report: dict  # report.as_dict
    text: str  # the table `grade` prints, with its "your code printed" section
    output: str  # what every piece printed (the tails the report keeps)

    def score(self, piece: str) -> int:
        return next(p["score"] for p in self.report["pieces"] if p["name"] == piece)

    def messages(self, piece: str) -> dict[str, str]:
        cases = next(p["cases"] for p in self.report["pieces"] if p["name"] == piece)
        return {c["name"]: c["message"] for c in cases if not c["passed"] and not c["skipped"]}

    @property
    def everything(self) -> str:
        return json.dumps(self.report) + "\n" + self.text + "\n" + self.output


def judge(sub: Path, pieces: list[str], limits: Limits = QUICK, fresh: bool = False) -> Graded:
    """Grade like `grade_dict`, keeping the text table and what the pieces printed."""
    with tempfile.TemporaryDirectory(prefix="attnlab-redteam-") as tmp:
        staged = stage(sub, Path(tmp))
        runs = grade(submission=staged, pieces=pieces, seed="0", limits=limits,
                     judge_server=None if fresh else shared_judge_server())
    report = as_dict(runs)
    assert [p["name"] for p in report["pieces"]] == pieces
    return Graded(report, to_text(runs, str(sub)), "".join(r.output for r in runs))


def run_cli(sub: Path, pieces: list[str], tmp_path: Path, *extra: str) -> Graded:
    """`grade PIECES --submission SUB --quick --format json --out FILE`: the table on stdout, the JSON in FILE."""
    out = tmp_path / f"report-{secrets.token_hex(4)}.json"
    args = [*pieces, "--submission", str(sub), "--quick", "--format", "json", "--out", str(out),
            "--case-timeout", "5", "--memory-gb", "4", *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output + repr(result.exception)
    report = json.loads(out.read_text())
    assert "Total:" in result.output
    return Graded(report, result.output, "")


def run_batch(subs: list[Path], pieces: list[str], tmp_path: Path, monkeypatch,
              limits: Limits = QUICK) -> dict[str, dict]:
    """batch.main with -j 1 over `subs`, grading only `pieces` (the rest would only cost time); rows by student."""
    monkeypatch.setattr(batch_verb, "PIECES", {p: PIECES[p] for p in pieces})
    out = tmp_path / "grades.csv"
    graded, bad = batch_verb.main(submissions=subs, out=out, reports=tmp_path / "reports", jobs=1, seed="0",
                                  limits=limits, progress=False)
    assert (graded, bad) == (len(subs), 0)
    return {r["student"]: r for r in csv.DictReader(out.open())}


def only_wrong_values(g: Graded, piece: str) -> None:
    """Every case of `piece` was lost to a wrong value, not to an error: the hostile code ran to its end."""
    msgs = g.messages(piece)
    assert msgs and all("differs from the reference" in m for m in msgs.values()), msgs


def full_marks(g: Graded, *pieces: str) -> None:
    for p in pieces:
        assert g.score(p) == FULL[p], f"{p} scored {g.score(p)}/{FULL[p]}: {g.messages(p)}"


# ---- an armed attack more than one module uses ----

KEY_HUNT = '''
import os as _o

def _hunt(where):
    """Print any ATTNLAB_SEAL_KEY found in the environment or in /proc."""
    for k, v in _o.environ.items():
        if "ATTNLAB" in k:
            print("KEY-FOUND", where, k, v)
    if where != "import":
        return  # /proc once per worker is enough
    ppid = _o.getppid()
    paths = [f"/proc/{ppid}/environ", f"/proc/{ppid}/cmdline", f"/proc/{ppid}/mem", "/proc/self/environ"]
    paths += [f"/proc/{pid}/environ" for pid in range(1, 1 << 15)]
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
        except OSError:
            continue
        at = data.find(b"ATTNLAB_SEAL_KEY")
        if at >= 0:
            print("KEY-FOUND", path, data[at:at + 120])

_hunt("import")
'''
