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


def test_the_shapes_a_shape_error_ends_with_are_the_reference_docstrings():
    import re

    from grader import REFERENCE
    from grader.cases import util  # noqa: F401 - fills verdicts.SIGNATURES

    text = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in REFERENCE.glob("*.py"))
    assert {"attention_context", "BahdanauAttention", "LuongDotAttention", "forward_step"} <= set(verdicts.SIGNATURES)
    for name, said in verdicts.SIGNATURES.items():
        assert name in text, name
        for arg in set(re.findall(r"([a-z_]\w*) \(", said)) - {"each", "and"}:
            assert f"{arg}: (" in text or f"{arg}: each (" in text or f"({arg}" in text, (name, arg)
        for shape in re.findall(r"\([^()]*\)", said):
            assert shape in text, (name, shape)


def test_a_shape_error_ends_with_the_functions_shapes_and_any_other_error_does_not():
    from grader.cases import util  # noqa: F401
    from grader.judge.errors import RemoteError

    def raised(type_name: str, message: str) -> RemoteError:
        return RemoteError("error", type_name, message, "")

    shape = raised("RuntimeError", "Expected size for first two dimensions of batch2 tensor to be: [3, 7] but got: [3, 6].")
    said = str(verdicts.student_failure(shape, "attention_context"))
    assert "A shape does not fit: attention_context takes alpha (B, T_src) and encoder_outputs (B, T_src, H)" in said
    assert "shape does not fit" not in str(verdicts.student_failure(raised("KeyError", "'x'"), "attention_context"))
    assert "shape does not fit" not in str(verdicts.student_failure(shape, "something else"))


def test_a_miss_says_how_it_relates_to_the_reference_in_words_never_a_number():
    import re

    expected = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    for actual, said in ((expected.T.reshape(3, 5), "the right values in other places"),
                         (-expected, "the right values with the opposite sign"),
                         (expected * 0.6, "right up to one common factor"),
                         (expected + 0.7 * torch.randn(3, 5, generator=torch.Generator().manual_seed(2)), None)):
        with pytest.raises(verdicts.CaseFailure) as e:
            verdicts.close(actual, expected, "context", "hint")
        text = str(e.value)
        assert (said in text) if said else not any(w in text for w in ("other places", "opposite sign", "factor"))
        assert not re.search(r"\d\.\d|\d{2,}", text.replace("1e-", "")), text
