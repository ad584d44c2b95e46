"""Assertions for the hidden cases: they tell a student what is wrong without printing the answer."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

# bound before any submission is imported, so a submission that patches torch cannot change them
_assert_close = torch.testing.assert_close
_isfinite = torch.isfinite
_Tensor = torch.Tensor


class CaseFailure(AssertionError):
    """A failed case; its text is shown to the student as is."""


def fail(message: str) -> None:
    raise CaseFailure(message)


def tensor(x: object, what: str, shape: tuple[int, ...] | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Check that `x` is a plain tensor of the given shape and dtype."""
    if type(x) not in (torch.Tensor, nn.Parameter):
        fail(f"{what} should be a torch.Tensor, got {type(x).__name__}")
    if shape is not None and tuple(x.shape) != tuple(shape):
        fail(f"{what} has shape {tuple(x.shape)}, expected {tuple(shape)}; check which dimensions you squeeze, stack or transpose")
    if dtype is not None and x.dtype != dtype:
        fail(f"{what} has dtype {x.dtype}, expected {dtype}")
    return x


def pair(x: object, what: str) -> tuple:
    if not isinstance(x, tuple) or len(x) != 2:
        fail(f"{what} should be a tuple of 2, got {type(x).__name__}{'' if not isinstance(x, tuple) else f' of {len(x)}'}")
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
    """Call student code and name the call when it raises something other than NotImplementedError."""
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, CaseFailure, MemoryError, SystemExit):
        raise
    except RuntimeError as e:
        if "allocate" in str(e):
            raise
        fail(f"{what} raised RuntimeError: {_short(e)}{where(e)}")
    except Exception as e:  # noqa: BLE001
        fail(f"{what} raised {type(e).__name__}: {_short(e)}{where(e)}")


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else "")[:300]


def where(e: BaseException) -> str:
    tb, out = e.__traceback__, ""
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if "attnlab_submission" in tb.tb_frame.f_globals.get("__name__", ""):
            out = f" (in {fn.rsplit('/', 1)[-1]}, line {tb.tb_lineno}, in {tb.tb_frame.f_code.co_name})"
        tb = tb.tb_next
    return out


def on_device(device: str, hint: str, **tensors: object) -> None:
    """Fail when an output left the inputs' device (a tensor made inside forward without device=...)."""
    for name, t in tensors.items():
        if tensor(t, name).device.type != device:
            fail(f"{name} ended up on {t.device.type}, not on the inputs' {device} device; {hint}")


def copy_weights(student: nn.Module, reference: nn.Module, what: str) -> None:
    """Give the student's module the reference's seeded random weights."""
    try:
        student.load_state_dict(reference.state_dict())
    except RuntimeError as e:
        fail(f"{what}'s parameters do not match the lab's layout ({_short(e)}); keep the constructor as given")


class OpCounter(TorchDispatchMode):
    """Counts the aten operations a piece of code runs (a Python loop over positions shows as growth with T)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def ops(fn) -> int:
    with OpCounter() as counter:
        fn()
    return counter.count

