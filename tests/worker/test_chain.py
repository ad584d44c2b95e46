"""The no-loop case's chain (grader/worker/chain.py): each step's input is drawn from the answer before it, so that
no step's input is known before that answer, and no answer can be steered to repeat an earlier input."""
from __future__ import annotations

import torch

from grader.worker import chain


def test_another_previous_answer_draws_another_permutation():
    drawn = {tuple(chain.permutation(bytes([i]) * 64, 200, 7).tolist()) for i in range(50)}
    assert len(drawn) == 50


def test_an_answer_changed_in_its_high_bits_only_still_draws_another_permutation():
    """CRC32 seeded torch's generator in its high 32 bits, which torch drops: every step drew the same positions."""
    out = torch.randn(200, 1)
    same = chain.permutation(chain.answer_bytes(out), 200, 7)
    nudged = out.clone()
    nudged[0, 0] = torch.nextafter(nudged[0, 0], torch.tensor(1e9))  # one ulp: inside any tolerance
    assert torch.equal(same, chain.permutation(chain.answer_bytes(out), 200, 7))
    assert not torch.equal(same, chain.permutation(chain.answer_bytes(nudged), 200, 7))
    assert not torch.equal(same, chain.permutation(chain.answer_bytes(out), 200, 8))  # the seed counts too


def test_the_chain_gives_each_step_the_permutation_its_previous_answer_draws():
    alpha, enc = torch.softmax(torch.randn(3, 9), -1), torch.randn(3, 9, 2)
    seen = []

    def fn(a, e):
        seen.append(a.clone())
        return torch.bmm(a.unsqueeze(1), e).squeeze(1)

    outs = chain.run(fn, alpha, enc, 4, 11)
    previous = b""
    for a, out in zip(seen, outs):
        assert torch.equal(a, alpha.index_select(1, chain.permutation(previous, 9, 11)))
        previous = chain.answer_bytes(out)
    assert len({tuple(a.flatten().tolist()) for a in seen}) == 4  # four inputs, none repeated
