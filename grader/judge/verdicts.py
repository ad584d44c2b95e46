"""Assertions for the hidden cases: they tell a student what is wrong without printing the answer."""
from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.nn as nn

from grader.judge import withhold
from grader.judge.errors import RemoteError

_isclose = torch.isclose
_isfinite = torch.isfinite


class CaseFailure(AssertionError):
    """A failed case; its text is shown to the student as is."""


def fail(message: str) -> None:
    raise CaseFailure(message)


def tensor(x: Any, what: str, shape: tuple[int, ...] | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Check that `x` is a plain tensor of the given shape and dtype."""
    if type(x) not in (torch.Tensor, nn.Parameter):
        fail(f"{what} should be a torch.Tensor, got {withhold.value_type(x)}")
    if x.layout != torch.strided or x.is_nested or x.is_quantized:  # sparse, nested, quantized: not an answer
        fail(f"{what} should be a dense tensor, got a {str(x.layout).removeprefix('torch.')} one; return it as torch "
             "computes it (no to_sparse(), nested or quantized tensors)")
    if x.device.type == "meta":
        fail(f"{what} is a meta tensor, which holds no values; compute it on the inputs' device")
    if shape is not None and tuple(x.shape) != tuple(shape):
        # withheld: a shape is numbers of the worker's choosing (a tensor with a 0 in it can have any other sizes)
        got = withhold.hide(f"shape {tuple(x.shape)}", "another shape")
        fail(f"{what} has {got}, expected {tuple(shape)}; check which dimensions you squeeze, stack or transpose")
    if dtype is not None and x.dtype != dtype:
        fail(f"{what} has dtype {x.dtype}, expected {dtype}")
    return x


def pair(x: object, what: str) -> tuple:
    if not isinstance(x, tuple) or len(x) != 2:
        got = withhold.value_type(x)
        if isinstance(x, tuple):
            got += withhold.hide(f" of {len(x)}", " of another length")
        fail(f"{what} should be a tuple of 2, got {got}")
    return x


def finite(x: torch.Tensor, what: str, hint: str = "") -> None:
    if x.device.type != "meta" and not bool(_isfinite(x).all()):
        fail(f"{what} contains NaN or inf. {hint}".strip())


def is_close(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Whether torch.testing.assert_close(actual, expected) would pass in float64: the same shape, every value
    within atol + rtol * |expected| (torch.isclose, which assert_close applies), NaN close to nothing.

    Not assert_close itself: its first call imports torch.distributed's DTensor (sympy with it), half a second
    of CPU in every judges' server's start (tests/grader/test_verdicts.py holds the two to the same answers)."""
    if not isinstance(actual, torch.Tensor) or actual.layout != torch.strided or actual.device != expected.device:
        return False
    if actual.shape != expected.shape or actual.is_quantized != expected.is_quantized:
        return False
    if actual.device.type == "meta":  # no values to compare, as in assert_close
        return True
    return bool(_isclose(actual.detach().double(), expected.detach().double(), rtol=rtol, atol=atol).all())


def how_far(err: float) -> str:
    """The size of a miss as an order of magnitude: "largest error 9.96" would hand a student the hidden
    value to three digits, a power of ten does not."""
    if not err < 1:  # NaN and inf too
        return "off by more than 1"
    if not err > 0:
        return "off by a rounding error"
    k = round(math.log10(err))
    return "off by less than 1" if k >= 0 else f"off by about 1e{k}"


def close(actual: torch.Tensor, expected: torch.Tensor, what: str, hint: str, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Fail with `hint` (never the expected values) unless `actual` matches the reference."""
    tensor(actual, what, tuple(expected.shape), expected.dtype)
    if actual.device != expected.device:  # a meta answer has no values to compare
        fail(f"{what} is on the {actual.device.type} device, not on the inputs' {expected.device.type} device; "
             "make new tensors on the inputs' device")
    finite(actual, what)
    if not is_close(actual, expected, atol, rtol):
        err = (actual.detach().double() - expected.detach().double()).abs().max().item()
        fail(f"{what} differs from the reference ({how_far(err)}{how(actual, expected, atol, rtol)}). {hint}")


def how(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> str:
    """How a miss relates to the reference, where one plain relation explains it: ": the right values in other
    places", ": the right values with the opposite sign", ": right up to one common factor"; "" otherwise. Words,
    never a number: what a student can try again, not what the hidden values are."""
    a, e = actual.detach().double().flatten(), expected.detach().double().flatten()
    if a.numel() < 2 or not bool(e.abs().max() > 0):
        return ""
    if is_close(a.sort().values, e.sort().values, atol, rtol):
        return ": the right values in other places (a transpose, a reshape or an index)"
    if is_close(-a, e, atol, rtol):
        return ": the right values with the opposite sign"
    factor = float((a @ e) / (e @ e))
    if factor > 0 and abs(factor - 1) > 1e-3 and is_close(a, factor * e, atol, rtol):
        return ": right up to one common factor (a scale or a normalisation)"
    return ""


def call(fn, *args, what: str, **kwargs):
    """Call student code (a worker handle) and name the call when it raises."""
    try:
        return fn(*args, **kwargs)
    except RemoteError as e:
        raise student_failure(e, what) from None


# what each function of the lab takes and returns, in its docstring's names ({name: text}; the cases fill it,
# grader/cases/util.py): the one line in the lab's words that a shape error in that function ends with
SIGNATURES: dict[str, str] = {}
_SHAPE_ERROR = re.compile(r"size|shape|dimension|mat1 and mat2|must match", re.IGNORECASE)


def shape_line(e: RemoteError, what: str) -> str:
    """" A shape does not fit: ..." for a shape error raised in a function SIGNATURES names, else ""."""
    if e.type_name not in ("RuntimeError", "ValueError", "IndexError") or not _SHAPE_ERROR.search(str(e)):
        return ""
    name = next((n for n in SIGNATURES if n in what), None)
    if name is None:
        return ""
    return (f" A shape does not fit: {name} takes {SIGNATURES[name]}, as its docstring says; check each operand of "
            "the failing operation against those shapes (a transpose, or an unsqueeze missing or on another axis, "
            "is the usual cause).")


def student_failure(e: RemoteError, what: str) -> Exception:
    """What the student sees for an exception their code raised in the worker."""
    if e.kind == "not_implemented":
        return NotImplementedError(str(e))
    if e.kind == "exit":
        code = withhold.hide(str(e), "")
        return CaseFailure(f"your code called sys.exit({code}); return a value instead of exiting")
    if e.kind == "memory":
        return CaseFailure("ran out of memory: the grader caps each piece's memory; look for a tensor far larger than (B, T_src, H)")
    if e.kind == "recursion":
        return CaseFailure("hit Python's recursion limit: a method calls itself")
    if withhold.active():  # the type if built in, the student's own file and line; no message, no function name
        said = withhold.hide("", f"{what} raised {withhold.error_type(e.type_name)}{withhold.where(e.where)}; "
                                 f"{withhold.NOTE}")
    else:
        said = f"{what} raised {e.type_name}: {e}{e.where}"
    line = shape_line(e, what)
    return CaseFailure(f"{said}.{line}" if line else said)


def copy_weights(student, reference: nn.Module, what: str) -> None:
    """Give the student's module (a worker handle) the reference's seeded random weights."""
    try:
        student.load(reference.state_dict())
    except RemoteError as e:
        said = withhold.hide(f" ({e})", "")
        fail(f"{what}'s parameters do not match the lab's layout{said}; keep the constructor as given")
