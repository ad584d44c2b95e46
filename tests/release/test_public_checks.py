"""The public checks of a student release (no seal key): a piece earns its point on its own file, whatever state the
files it imports are in, and only for its own honest work.

A piece that imports another's module (additive and luong: context; decoder: encoder and additive; evaluation:
decoder) runs its point-earning check with the lab's stand-ins for those modules (grader/public/standin), as the
graded run does with the reference's. A point-free case then runs it with the student's own files: skipped, in one
line naming the file it waits for, while one of them is a stub; failed (at no cost) when they do not work together.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader import ROOT
from grader.public import standin
from grader.public.standin import context as standin_context

REFERENCE = ROOT / "reference"
UNMASKED = ('scores = scores.masked_fill(~src_mask, float("-inf"))', "scores = scores")  # pads keep their weight


def submission(rel: Path, where: Path, reference: tuple[str, ...] = (), edits: dict[str, tuple[str, str]] | None = None
               ) -> Path:
    """The release's stubs, with the reference's file for the modules in `reference` and an edited reference file for
    those in `edits` ({module: (old, new)})."""
    shutil.copytree(rel / "exercises", where)
    for module in reference:
        shutil.copyfile(REFERENCE / f"{module}.py", where / f"{module}.py")
    for module, (old, new) in (edits or {}).items():
        text = (REFERENCE / f"{module}.py").read_text()
        assert old in text, (module, old)
        (where / f"{module}.py").write_text(text.replace(old, new))
    return where


def grade_public(rel: Path, sub: Path) -> dict[str, dict]:
    """`grade --format json` in the release without the seal key: the public checks, by piece."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    env["PYTHONPATH"] = str(rel)
    done = subprocess.run([sys.executable, "-m", "grader", "--format", "json", "--submission", str(sub)], cwd=rel,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return {p["name"]: p for p in json.loads(done.stdout)["pieces"]}


def cases(piece: dict) -> dict[str, tuple[str, str]]:
    """{case: (passed | skipped | failed, message)}."""
    return {c["name"]: ("passed" if c["passed"] else "skipped" if c["skipped"] else "failed", c["message"])
            for c in piece["cases"]}


def scores(report: dict[str, dict]) -> dict[str, int]:
    return {name: p["score"] for name, p in report.items()}


def test_each_piece_that_imports_another_earns_its_point_while_those_files_are_stubs_and_names_what_it_waits_for(
        release, tmp_path):
    rel, _ = release  # the brief's case: a correct additive.py beside the stub of context.py, and its like
    report = grade_public(rel, submission(rel, tmp_path / "s", reference=("additive", "luong", "decoder", "evaluation")))
    assert scores(report) == {"encoder": 0, "additive": 1, "context": 0, "luong": 1, "decoder": 1, "evaluation": 1}
    assert report["additive"]["max_score"] == 1  # the point-free case adds nothing to the total
    said = {name: cases(p) for name, p in report.items()}
    assert said["additive"]["test_it_works_with_your_own_context_file"] == (
        "skipped", "skipped: additive with your own context.py: not checked until context.py is written; additive.py "
                   "alone was checked with the lab's stand-in for it")
    assert said["luong"]["test_it_works_with_your_own_context_file"][1].startswith(
        "skipped: luong with your own context.py: not checked until context.py is written")
    assert said["decoder"]["test_it_works_with_your_own_encoder_and_attention_files"][1].startswith(
        "skipped: decoder with your own encoder.py, context.py and additive.py: not checked until encoder.py and "
        "context.py are written")
    assert "not checked until encoder.py and context.py are written" in \
        said["evaluation"]["test_it_works_with_your_own_model_files"][1]
    assert said["context"]["test_it_is_the_weighted_sum_of_encoder_states"][1].startswith("not implemented yet")


def test_a_stub_or_a_wrong_piece_earns_nothing_whether_the_files_it_imports_are_written_or_stubs(release, tmp_path):
    rel, _ = release
    wrong = {"additive": UNMASKED, "luong": UNMASKED,
             "decoder": ("return logits, (h, c), alpha", "return logits[:, :-1], (h, c), alpha"),
             "evaluation": ("(correct[lengths == n].sum() / total[lengths == n].sum()).item()",
                            "(correct[lengths == n].sum() / total[lengths == n].sum()).item() + 1.0")}
    beside_written = grade_public(rel, submission(rel, tmp_path / "written", reference=("encoder", "context"),
                                                  edits={"additive": UNMASKED, "decoder": wrong["decoder"],
                                                         "evaluation": wrong["evaluation"]}))
    assert scores(beside_written) == {"encoder": 1, "additive": 0, "context": 1, "luong": 0, "decoder": 0,
                                      "evaluation": 0}  # luong: still its stub
    assert "alpha is not exactly 0 at pad positions" in cases(beside_written["additive"])[
        "test_alpha_is_a_distribution_over_real_tokens"][1]
    beside_stubs = grade_public(rel, submission(rel, tmp_path / "stubs", edits=wrong))
    assert scores(beside_stubs) == dict.fromkeys(scores(beside_stubs), 0)
    for piece in ("additive", "luong", "decoder", "evaluation"):
        assert [state for state, _ in cases(beside_stubs[piece]).values()] == ["failed", "skipped"], piece


def test_with_the_files_written_they_are_also_checked_together_and_a_wrong_one_shows_there_at_no_cost(release, tmp_path):
    rel, _ = release
    doubled = ("return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
               "return 2 * torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)")
    report = grade_public(rel, submission(rel, tmp_path / "s", reference=("additive",), edits={"context": doubled}))
    assert scores(report)["additive"] == 1 and scores(report)["context"] == 0
    state, message = cases(report["additive"])["test_it_works_with_your_own_context_file"]
    assert state == "failed" and message.startswith("with your own context.py: context differs")


def test_no_stand_in_is_a_pieces_answer_and_each_keeps_the_documented_shapes():
    torch.manual_seed(0)
    B, T, H, E, V = 3, 7, 6, 5, 11
    alpha, enc = torch.softmax(torch.randn(B, T), -1), torch.randn(B, T, H)
    one_hot = torch.nn.functional.one_hot(torch.tensor([0, 3, 6]), T).float()
    for a, e in ((alpha, enc), (one_hot, enc), (torch.ones(B, 1), enc[:, :1])):  # the context cases' kinds of input
        got = standin_context.attention_context(a, e)
        assert got.shape == (B, H) and not torch.allclose(got, (a[..., None] * e).sum(1), atol=1e-3)
    from grader.public.standin import additive, decoder, encoder

    outputs, (h, c) = encoder.EncoderAll(V, E, H)(torch.randint(1, V, (B, T)))
    assert outputs.shape == (B, T, H) and h.shape == c.shape == (1, B, H)
    m = torch.arange(T)[None] < torch.tensor([T, 4, 2])[:, None]
    context, weights = additive.BahdanauAttention(H)(enc, torch.randn(B, H), m)
    assert context.shape == (B, H) and torch.allclose(weights.sum(1), torch.ones(B)) and not weights[~m].any()
    model = decoder.Seq2SeqAttn(V, V + 2, E, H)
    logits, state, a = model.decoder.forward_step(torch.ones(B, 1, dtype=torch.long), (h[0], c[0]), outputs, m)
    assert logits.shape == (B, V + 2) and state[0].shape == (B, H) and a.shape == (B, T)
    with pytest.raises(ValueError, match="one step at a time"):
        model(torch.ones(B, T, dtype=torch.long), m, torch.ones(B, 4, dtype=torch.long))
    assert standin.__doc__ and "None of them is a piece's answer" in standin.__doc__
