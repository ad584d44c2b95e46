"""verdicts.is_close, the comparison behind every hidden case: the same answers as torch.testing.assert_close."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from grader.judge import verdicts


def assert_close_says(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    try:
        torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol)
    except AssertionError:
        return False
    return True


def pairs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    want = torch.randn(3, 5, generator=g)
    out = []
    for scale in (0.0, 1e-7, 1e-6, 9e-6, 1.1e-5, 1e-4, 1e-3, 1.0):  # either side of atol + rtol * |want|
        out.append((want + scale * torch.randn(3, 5, generator=g), want))
        out.append((want * (1 + scale), want))
    odd = want.clone()
    odd[1, 2] = float("nan")
    out += [(odd, want), (odd, odd)]  # NaN is close to nothing, itself included
    inf = want.clone()
    inf[0, 0] = float("inf")
    out += [(inf, want), (inf, inf), (-inf, inf)]
    out += [(want.T, want), (want[None], want), (want[:, :1], want[:, :1].expand(3, 5))]  # shapes never broadcast
    out += [(torch.zeros(0, 5), torch.zeros(0, 5)), (torch.tensor(1.0), torch.tensor(1.0 + 1e-3))]
    out += [(torch.arange(6).view(2, 3), torch.arange(6.0).view(2, 3))]  # dtypes compared in float64
    return out


@pytest.mark.parametrize("atol, rtol", [(1e-5, 1e-4), (1e-3, 0.0), (0.0, 1e-2)])
def test_is_close_gives_assert_closes_answer_on_every_pair(atol, rtol):
    for actual, expected in pairs():
        assert verdicts.is_close(actual, expected, atol=atol, rtol=rtol) == \
            assert_close_says(actual, expected, atol, rtol), (actual, expected)


def test_is_close_refuses_what_is_not_a_dense_tensor_on_the_expected_device():
    want = torch.ones(2, 3)
    assert not verdicts.is_close([[1.0] * 3] * 2, want)
    assert not verdicts.is_close(want.to_sparse(), want)
    assert not verdicts.is_close(torch.ones(2, 3, device="meta"), want)


def test_a_comparison_imports_neither_dtensor_nor_sympy():
    # what assert_close's first call would import: half a second of every judges' server's start
    code = ("import sys, torch; from grader.judge import verdicts; "
            "verdicts.is_close(torch.ones(2), torch.ones(2)); "
            "print(sorted(m for m in ('sympy', 'torch.distributed.tensor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
