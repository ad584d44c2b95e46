"""The fault suite: broken and hostile submissions cost their own piece, never another, never inflate.

The hostile ones that target the jail, the judge or the report (signals, patched torch, printed workflow
commands) are in the red-team suite, tests/redteam/."""
from __future__ import annotations

import pytest

from grader.runner.results import Limits

from helpers import at_import, grade_dict, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

FWD = "    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:\n"
BODY = '        """Encode a batch of padded source sentences.'


def in_forward(code: str) -> list[tuple[str, str]]:
    return [(FWD + BODY, FWD + f"        {code}\n" + BODY)]


FAULTS = {
    "syntax error": (at_import("def broken(:"), "syntax error at line"),
    "exception at import": (at_import("raise ValueError('bad config')"), "importing encoder.py raised ValueError"),
    "os._exit at import": (at_import("import os; os._exit(0)"), "exited early"),
    "sys.exit inside forward": (in_forward("import sys; sys.exit(0)"), "sys.exit(0)"),
    "infinite loop inside forward": (in_forward("while True: pass"), "timed out"),
    "crash by signal": (in_forward("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), "signal 11 (SIGSEGV)"),
    "NaN output": ([("return outputs, (h, c)", "return outputs * float('nan'), (h, c)")], "NaN"),
    "wrong shape": ([("return outputs, (h, c)", "return outputs.transpose(0, 1), (h, c)")], "has shape"),
    "wrong dtype": ([("return outputs, (h, c)", "return outputs.double(), (h.double(), c.double())")], "dtype"),
    "a non-tensor": ([("return outputs, (h, c)", "return outputs.tolist(), (h, c)")], "should be a torch.Tensor"),
    "a tuple of the wrong length": ([("return outputs, (h, c)", "return outputs, h, c")], "tuple of 2"),
    "__eq__ always True": ([("return outputs, (h, c)",
                             "class Yes:\n            __eq__ = lambda self, other: True\n            shape = outputs.shape\n"
                             "        return Yes(), (h, c)")], "should be a torch.Tensor"),
    "writing to the grader's files": (at_import("open(__import__('grader').__file__, 'a').write('#')"), "PermissionError"),
    "huge allocation": (in_forward("torch.empty(10**12)"), "out of memory"),
    "reading the reference from disk": (at_import(
        "import grader, pathlib\n"
        "exec((pathlib.Path(grader.__file__).resolve().parent.parent / 'reference' / 'encoder.py').read_text())"), "Permission denied"),
    "an import the worker cannot read": (at_import("import grader.lab.evaluate"), "evaluate"),  # not found or refused
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_costs_its_own_piece_and_names_the_cause(lab, fault):
    edits, cause = FAULTS[fault]
    sub = lab(edits={"encoder": edits})
    limits = Limits(case_timeout=2, piece_timeout=60, memory_gb=4, quick=True)
    report = grade_dict(sub, ["encoder", "context"], limits)
    got = scores(report)
    assert got["encoder"][0] == 0, f"{fault}: encoder scored {got['encoder']}"
    assert got["context"][0] == got["context"][1], f"{fault}: context lost points"
    messages = {c["message"] for c in report["pieces"][0]["cases"] if not c["skipped"]}
    assert any(cause in m for m in messages), f"{fault}: no message names {cause!r}: {messages}"
