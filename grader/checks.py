"""Assertions for the hidden cases: they tell a student what is wrong without printing the answer."""
from __future__ import annotations

import torch
import torch.nn as nn

from .judge.remote import RemoteError

_assert_close = torch.testing.assert_close
_isfinite = torch.isfinite


class CaseFailure(AssertionError):
    """A failed case; its text is shown to the student as is."""


def fail(message: str) -> None:
    raise CaseFailure(message)


def tensor(x: object, what: str, shape: tuple[int, ...] | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Check that `x` is a plain tensor of the given shape and dtype."""
    if type(x) not in (torch.Tensor, nn.Parameter):
        fail(f"{what} should be a torch.Tensor, got {getattr(x, 'type_name', None) or type(x).__name__}")
    if shape is not None and tuple(x.shape) != tuple(shape):
        fail(f"{what} has shape {tuple(x.shape)}, expected {tuple(shape)}; check which dimensions you squeeze, stack or transpose")
    if dtype is not None and x.dtype != dtype:
        fail(f"{what} has dtype {x.dtype}, expected {dtype}")
    return x


def pair(x: object, what: str) -> tuple:
    if not isinstance(x, tuple) or len(x) != 2:
        got = getattr(x, "type_name", None) or type(x).__name__
        fail(f"{what} should be a tuple of 2, got {got}{'' if not isinstance(x, tuple) else f' of {len(x)}'}")
    return x


def finite(x: torch.Tensor, what: str, hint: str = "") -> None:
    if x.device.type != "meta" and not bool(_isfinite(x).all()):
        fail(f"{what} contains NaN or inf. {hint}".strip())


def is_close(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    try:
        _assert_close(actual.detach().double(), expected.detach().double(), atol=atol, rtol=rtol)
    except AssertionError:
        return False
    return True


def close(actual: torch.Tensor, expected: torch.Tensor, what: str, hint: str, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Fail with `hint` (never the expected values) unless `actual` matches the reference."""
    tensor(actual, what, tuple(expected.shape), expected.dtype)
    finite(actual, what)
    if not is_close(actual, expected, atol, rtol):
        err = (actual.detach().double() - expected.detach().double()).abs().max().item()
        fail(f"{what} differs from the reference (largest error {err:.3g}). {hint}")


def call(fn, *args, what: str, **kwargs):
    """Call student code (a worker handle) and name the call when it raises."""
    try:
        return fn(*args, **kwargs)
    except RemoteError as e:
        raise student_failure(e, what) from None


def student_failure(e: RemoteError, what: str) -> Exception:
    """What the student sees for an exception their code raised in the worker."""
    if e.kind == "not_implemented":
        return NotImplementedError(str(e))
    if e.kind == "exit":
        return CaseFailure(f"your code called sys.exit({e}); return a value instead of exiting")
    if e.kind == "memory":
        return CaseFailure("ran out of memory: the grader caps each piece's memory; look for a tensor far larger than (B, T_src, H)")
    if e.kind == "recursion":
        return CaseFailure("hit Python's recursion limit: a method calls itself")
    return CaseFailure(f"{what} raised {e.type_name}: {e}{e.where}")


def on_device(device: str, hint: str, **tensors: object) -> None:
    """Fail when an output left the inputs' device (a tensor made inside forward without device=...)."""
    for name, t in tensors.items():
        if tensor(t, name).device.type != device:
            fail(f"{name} ended up on {t.device.type}, not on the inputs' {device} device; {hint}")


def copy_weights(student, reference: nn.Module, what: str) -> None:
    """Give the student's module (a worker handle) the reference's seeded random weights."""
    try:
        student.load(reference.state_dict())
    except RemoteError as e:
        fail(f"{what}'s parameters do not match the lab's layout ({e}); keep the constructor as given")
