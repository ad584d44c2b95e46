"""The wire between judge and worker: junk and huge headers on the worker's descriptors, answers the judge
refuses to open (sparse tensors), and odd questions and raw frames sent to the judge's model."""
from __future__ import annotations

from textwrap import dedent

import pytest

from helpers import REFERENCE

from .harness import CONTEXT_SOLUTION, FULL, LOOSE, full_marks, hostile, judge

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

DESCRIPTORS = {
    "writing junk to descriptors 0..20": '''
        for _fd in range(21):
            try:
                _os.write(_fd, b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x08junk!!!!" * 4)
            except OSError:
                pass
    ''',
    "writing a huge frame header": '''
        try:
            _os.write(3, b"\\x7f" * 8)
        except OSError:
            pass
    ''',
    "closing descriptors 0..20": '''
        for _fd in range(21):
            try:
                _os.close(_fd)
            except OSError:
                pass
    ''',
}


@pytest.mark.parametrize("what", list(DESCRIPTORS))
def test_inherited_descriptors_reach_only_the_pieces_own_worker(lab, arena, what):
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n" + dedent(DESCRIPTORS[what]))}),
              ["context", "luong"])
    assert g.score("context") <= FULL["context"]
    assert all(m for m in g.messages("context").values())  # every lost case says why
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


SPARSE = {
    "COO": "torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1).to_sparse()",
    "CSR": "torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1).to_sparse_csr()",
    "COO with indices out of range": ("torch.sparse_coo_tensor(torch.tensor([[0, alpha.size(0) + 10**6], [0, 10**6]]), "
                                      "torch.ones(2), (alpha.size(0), encoder_outputs.size(-1)), check_invariants=False)"),
}


@pytest.mark.parametrize("how", list(SPARSE))
def test_a_sparse_answer_earns_no_more_than_a_dense_wrong_one(lab, arena, how):
    body = f"    _payload()\n    return {SPARSE[how]}\n"
    g = judge(lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, body),))}),
              ["context", "luong"], LOOSE)
    assert g.score("context") == 0, g.messages("context")  # a dense wrong answer (zeros) earns 0 too
    assert not any("grader could not run" in m for m in g.messages("context").values()), g.messages("context")
    full_marks(g, "luong")  # the judge survived to grade the next piece
    arena.assert_unharmed(g.everything)


ODD_QUESTIONS = '''
import sys as _sys

_wire = _sys.modules["grader.worker.wire"]


def _nest(x, n):
    for _ in range(n):
        x = (x,)
    return x


def _odd_questions(model, src, src_mask):
    """Ask the judge's model everything a well-behaved greedy decode never would; every answer must be a refusal
    or a value, never a judge that crashes, hangs or changes its model."""
    B = src.size(0)
    big = torch.ones(2**20, dtype=torch.long)
    state = (torch.zeros(B, 1), torch.zeros(B, 1))
    for ask in (
        lambda: model.encoder(big[None]),
        lambda: model.encoder(src.neg()),
        lambda: model.encoder(torch.full_like(src, 2**62)),
        lambda: model.encoder(src.float()),
        lambda: model.encoder(src.to(torch.complex64)),
        lambda: model.encoder(src.to("meta")),
        lambda: model.encoder(_nest(src, 40)),
        lambda: model.encoder("src", None, True, 2**70, float("nan")),
        lambda: model.encoder(src, **{"x" * 5000: 1}),
        lambda: model.decoder.forward_step(src[:, :1], state, object(), src_mask),
        lambda: model.decoder.forward_step(src[:, :1], [big, big], big, src_mask),
        lambda: model(src, src_mask, src, teacher_forcing_ratio=0.0),
        lambda: model(src, src_mask, torch.ones(1, 2**16, dtype=torch.long)[:, :300].expand(B, 300).contiguous()),
    ):
        try:
            ask()
        except Exception:
            pass
    for frame in ({"callback": "forward", "args": [1, 2], "kwargs": 5},
                  {"callback": "nothing", "args": {"__kind__": "list", "items": []}},
                  {"callback": ["not", "a", "name"]}):
        _wire.send(3, frame)  # straight onto the socket, past RemoteModel
        _wire.recv(3, trusted=True)
    for _ in range(300):
        model.encoder(src[:1, :1])
'''


def test_odd_questions_to_the_judges_model_cost_nothing(lab, arena):
    """The evaluation piece's callbacks: wrong dtypes, huge and negative ids, deep nesting, non-tensors, raw frames."""
    ref = (REFERENCE / "evaluation.py").read_text()
    first = "    ### BEGIN SOLUTION\n    enc_outputs, (h, c) = model.encoder(src)\n"
    assert first in ref
    src = hostile("evaluation", arena, top=ODD_QUESTIONS,
                  edits=((first, "    _payload()\n    _odd_questions(model, src, src_mask)\n" + first),))
    g = judge(lab(files={"evaluation": src}), ["evaluation"])
    full_marks(g, "evaluation")
    arena.assert_unharmed(g.everything)
