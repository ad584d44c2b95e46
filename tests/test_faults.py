"""The fault suite: broken and hostile submissions cost their own piece, never another, never inflate."""
from __future__ import annotations

import pytest

from conftest import grade_dict, scores
from grader.sandbox import Limits

FWD = "    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:\n"
BODY = '        """Encode a batch of padded source sentences.'


def at_import(code: str) -> list[tuple[str, str]]:
    return [("import torch.nn as nn\n", f"import torch.nn as nn\n{code}\n")]


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
        "exec((pathlib.Path(grader.__file__).parent.parent / 'reference' / 'encoder.py').read_text())"), "Permission denied"),
    "an import the worker cannot read": (at_import("import grader.evaluate"), "evaluate"),  # not found or refused
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


def test_printed_workflow_commands_reach_the_report_only_escaped(lab):
    loud = "print('::error::fake'); print('Autograding report'); print('Points 66/66')"
    sub = lab(edits={"context": [("    ### BEGIN SOLUTION\n    return", f"    ### BEGIN SOLUTION\n    {loud}\n    return")]})
    from click.testing import CliRunner

    from grader.cli import cli

    result = CliRunner().invoke(cli, ["context", "--submission", str(sub), "--quick"])
    assert result.exit_code == 0, result.output  # printing is not wrong: the piece keeps its points
    lines = result.output.splitlines()
    assert not any(ln.startswith("::") or ln.startswith("Points") or ln.startswith("Autograding") for ln in lines)
    assert any(": :error: :fake" in ln for ln in lines)


def test_another_process_cannot_be_signalled(lab):
    sub = lab(edits={"encoder": at_import("import os, signal; os.kill(os.getppid(), signal.SIGTERM)")})
    report = grade_dict(sub, ["encoder"])
    messages = {c["message"] for c in report["pieces"][0]["cases"]}
    assert any("PermissionError" in m and "not permitted" in m for m in messages), messages


def test_patching_torch_in_the_worker_changes_no_verdict(lab):
    patch = ("import torch, torch.testing\ntorch.testing.assert_close = lambda *a, **k: None\n"
             "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True")
    honest = grade_dict(lab(edits={"encoder": at_import(patch)}), ["encoder"])
    assert scores(honest)["encoder"][0] == scores(honest)["encoder"][1]  # the judge's torch is not the worker's
    wrong = lab(edits={"encoder": at_import(patch) + [("return outputs, (h, c)", "return outputs * 0, (h, c)")]})
    got = scores(grade_dict(wrong, ["encoder"]))["encoder"]
    assert got[0] < got[1]
