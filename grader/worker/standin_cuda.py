"""A stand-in CUDA device for the device cases: the same on every machine, with values, and not `meta`.

The device cases ask whether code that runs right on the CPU also keeps every tensor it makes on its
inputs' device. A real GPU answers that only where there is one; the `meta` device has no values and
announces itself (`x.device.type == "meta"`), so code can special-case it. Here the inputs, the module's
parameters and buffers, and every tensor made from them are `OnDevice` tensors: each holds a real CPU
tensor with the values, and says that it is on `cuda:0` (`x.device`, `x.is_cuda`, `x.get_device()`).
Every operation runs on the CPU values, after the check real CUDA makes: all tensors of an operation on
one device (any two devices, meta or a real GPU's among them, are a mismatch; a list passed by keyword is
checked as a positional one), but for CPU tensors of no dimension (scalars) in elementwise operations only,
the CPU indices of an indexing operation into a device tensor (not device indices into a CPU tensor), the
source of a copy, and the batch sizes of packed sequences, which torch keeps on the CPU; packing takes its
lengths on the CPU only, as torch's own check says. A tensor made without `device=` (`torch.zeros(B, T)`)
is a plain CPU tensor, and mixing it with the inputs raises torch's own "Expected all tensors to be on the
same device" error; an answer left on the CPU comes back marked as such. bench/device_table.py holds these
rules as a table of legal and illegal snippets, tested on the stand-in and runnable on a real GPU. Nothing
touches CUDA: underneath, torch sees a `meta` tensor (no CUDA device guard, no CUDA initialization), so a
machine without a GPU and one with a GPU decide the same.

Used by the worker's "probe" command (grader.worker.runtime); holds no case, expected value or score.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

DEVICE = torch.device("cuda", 0)
_CPU = torch.device("cpu")
# The rules real CUDA applies, by operation (tests/worker/test_standin_cuda.py holds a row for each, and
# bench/device_table.py runs the same rows on a real GPU):
# - indexing takes CPU indices (argument 1) into a device tensor, never device indices into a CPU tensor
_INDEXING = {"index.Tensor", "index_put_.default", "index_put.default", "_index_put_impl_.default"}
# - a copy takes its source (and a copy between devices both tensors) from anywhere: {op: those arguments}
_COPIES = {"copy_.default": {1}, "_copy_from.default": {0, 1}, "_copy_from_and_resize.default": {0, 1}}
# - packing takes the lengths on the CPU only (torch's words, from its C++ check); unpacking the batch sizes that
#   packing left there
_ON_THE_CPU = {"_pack_padded_sequence.default": 1}
_BATCH_SIZES = {"_pad_packed_sequence.default": {1}}
# - a CPU tensor of no dimension joins device tensors in elementwise (TensorIterator) operations only: those torch
#   tags pointwise, and these; every other operation checks every tensor's device
_ELEMENTWISE = {"masked_fill", "masked_fill_", "fill", "fill_", "where", "rsub", "index_fill", "index_fill_", "lerp",
                "lerp_", "index_put", "index_put_", "_index_put_impl_", "copy", "copy_"}
# outputs that stay on the CPU whatever the input's device: a packed sequence's batch sizes, padded lengths
_CPU_OUTPUTS = {"_pack_padded_sequence.default": {1}, "_pad_packed_sequence.default": {1}}
_DTYPE_NAMES = {torch.int64: "Long", torch.int32: "Int", torch.float32: "Float", torch.float64: "Double",
                torch.bool: "Bool"}


class DeviceMismatch(RuntimeError):
    """torch's own words for an operation that mixes a CPU tensor with device tensors."""


class OnDevice(torch.Tensor):
    """A tensor on the stand-in device: CPU values inside, `cuda:0` outside."""

    value: torch.Tensor

    @staticmethod
    def __new__(cls, value: torch.Tensor, requires_grad: bool = False):
        t = torch.Tensor._make_wrapper_subclass(
            cls, value.shape, strides=value.stride(), storage_offset=value.storage_offset(), dtype=value.dtype,
            layout=value.layout, device="meta", requires_grad=requires_grad)
        t.value = value
        return t

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self) -> torch.device:
        return DEVICE

    @property
    def is_cuda(self) -> bool:
        return True

    @property
    def is_cpu(self) -> bool:
        return False

    @property
    def is_meta(self) -> bool:
        return False

    def get_device(self) -> int:
        return DEVICE.index

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False, **kwargs):
        # torch's own new_tensor would build it on this tensor's options (meta, underneath)
        t = torch.tensor(data, dtype=dtype or self.dtype, device=_CPU)
        return (t if _target(device if device is not None else DEVICE) == "cpu" else OnDevice(t)).requires_grad_(
            requires_grad)

    def tolist(self):
        return self.value.tolist()  # as CUDA does: the values are copied to the host

    def numpy(self, *args, **kwargs):
        raise TypeError(f"can't convert {DEVICE} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                        "host memory first.")

    def __repr__(self) -> str:
        return f"{self.value!r}"[:-1] + f", device='{DEVICE}')"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return run(func, args, kwargs or {})


def _device_of(x: object) -> str | None:
    if isinstance(x, OnDevice):
        return "device"
    if isinstance(x, torch.Tensor):
        return x.device.type  # a real tensor: on the CPU (or a device of its own, never the stand-in)
    return None


def _named(device: str) -> str:
    return str(DEVICE) if device == "device" else device


@functools.cache
def _elementwise(func) -> bool:
    """Whether `func` is a TensorIterator operation, which lets a CPU tensor of no dimension join a device's."""
    base = func._schema.name.split("::")[-1]
    if base in _ELEMENTWISE or torch.Tag.pointwise in func.tags:
        return True
    if base.endswith("_"):  # an in-place form: as its out-of-place one
        try:
            return torch.Tag.pointwise in getattr(getattr(torch.ops.aten, base[:-1]), func._overloadname).tags
        except (AttributeError, RuntimeError):
            return False
    return False


def _tensors(x: object) -> list:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def check(func, name: str, args: tuple, kwargs: dict) -> set[str]:
    """Raise what real CUDA raises for this call's devices, in torch's words; when it is legal, the devices of the
    tensors that decide where the result is (not a copy's source, CPU indices or scalars)."""
    op = name.split(".")[0]
    if name in _ON_THE_CPU and len(args) > _ON_THE_CPU[name]:
        lengths = args[_ON_THE_CPU[name]]
        if isinstance(lengths, torch.Tensor) and _device_of(lengths) != "cpu":
            raise DeviceMismatch(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D "
                                 f"{_named(_device_of(lengths))} "
                                 f"{_DTYPE_NAMES.get(lengths.dtype, str(lengths.dtype))} tensor")
    exempt = set(_COPIES.get(name, ())) | _BATCH_SIZES.get(name, set())
    if name in _ON_THE_CPU:
        exempt.add(_ON_THE_CPU[name])  # on the CPU, as above
    if name in _INDEXING and len(args) > 1:
        exempt.add(1)
        where = _device_of(args[0])
        if any(_device_of(i) not in ("cpu", where) for i in _tensors(args[1])):
            raise DeviceMismatch(f"indices should be either on cpu or on the same device as the indexed tensor "
                                 f"({_named(where)})")
    scalars = _elementwise(func)
    devices: set[str] = set()
    for i, a in [*enumerate(args), *kwargs.items()]:
        if i in exempt or i == "device":
            continue
        for t in _tensors(a):
            d = _device_of(t)
            if not (d == "cpu" and t.dim() == 0 and scalars):  # a CPU scalar joins an elementwise operation
                devices.add(d)
    if len(devices) > 1:
        first, second = sorted(devices, key=lambda d: (d != "device", d))[:2]
        raise DeviceMismatch(f"Expected all tensors to be on the same device, but found at least two devices, "
                             f"{_named(first)} and {_named(second)}! (in {op})")
    return devices


def _target(device: object) -> str | None:
    """Where a `device=` argument puts a tensor: the stand-in for cuda (and meta, which is what torch's own
    C++ passes on for an OnDevice tensor's options), the CPU otherwise."""
    if device is None:
        return None
    return "device" if torch.device(device).type in ("cuda", "meta") else "cpu"


def _unwrap(x: object) -> object:
    return x.value if isinstance(x, OnDevice) else x


def _rebuilt(x: object, items: list) -> object:
    """A tuple or list like `x` (a namedtuple or torch's return types too) holding `items`; a plain tuple or list
    when its own class cannot be built so."""
    if type(x) in (tuple, list):
        return type(x)(items)
    try:
        return tuple.__new__(type(x), items) if hasattr(type(x), "_fields") else type(x)(items)
    except Exception:  # noqa: BLE001  (a class of the student's: its constructor decides nothing here)
        return tuple(items) if isinstance(x, tuple) else list(items)


def run(func, args: tuple, kwargs: dict):
    name = f"{func._schema.name.split('::')[-1]}.{func._overloadname}"
    target = _target(kwargs.get("device")) if "device" in kwargs else None
    if "device" in kwargs and kwargs["device"] is not None:
        kwargs = {**kwargs, "device": _CPU}
    if target is not None:  # a tensor made or moved where `device=` says: nothing to check
        on_device = target == "device"
    else:
        devices = check(func, name, args, kwargs)
        # only scalars of the device (or a copy's tensors) among the arguments: there too
        on_device = "device" in devices or (
            not devices and any(isinstance(t, OnDevice) for t in _tensors((args, kwargs))))
    if name.split(".")[0].endswith("_") and args and isinstance(args[0], OnDevice):  # in place: the same tensor
        func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        return args[0]
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    if not on_device:
        return out
    cpu_outputs = _CPU_OUTPUTS.get(name, set())
    if isinstance(out, (tuple, list)):
        return _rebuilt(out, [o if i in cpu_outputs or not isinstance(o, torch.Tensor) else OnDevice(o)
                              for i, o in enumerate(out)])
    return OnDevice(out) if isinstance(out, torch.Tensor) else out


class StandIn(TorchDispatchMode):
    """While active: tensors made with device=<the stand-in> (or like an OnDevice tensor) are OnDevice too.

    It takes the slot torch keeps for a fake-tensor mode, whose presence tells torch not to initialize CUDA
    for a `device="cuda"` argument (there may be no CUDA to initialize)."""

    def __init__(self) -> None:
        super().__init__()
        self._mode_key = torch._C._TorchDispatchModeKey.FAKE

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return run(func, args, kwargs or {})

    def __enter__(self):
        # torch.tensor(data, device=...) and friends: build on the CPU, then move with a dispatched copy (as under
        # a fake-tensor mode), instead of asking a CUDA backend that may not exist
        self._lift = torch._C._only_lift_cpu_tensors()
        torch._C._set_only_lift_cpu_tensors(True)
        return super().__enter__()

    def __exit__(self, *exc):
        torch._C._set_only_lift_cpu_tensors(self._lift)
        return super().__exit__(*exc)


def to_device(x: object) -> object:
    """`x` with every tensor in it on the stand-in device (a module: its parameters and buffers, in place)."""
    if isinstance(x, torch.nn.Module):
        for mod in x.modules():
            for k, p in list(mod._parameters.items()):
                if p is not None:
                    mod._parameters[k] = OnDevice(p.detach(), requires_grad=p.requires_grad)
            for k, b in list(mod._buffers.items()):
                if b is not None:
                    mod._buffers[k] = OnDevice(b)
            if isinstance(mod, torch.nn.RNNBase):  # the weights its forward reads, without flatten_parameters (cuDNN)
                mod._flat_weights = [getattr(mod, n, None) for n in mod._flat_weights_names]
                mod._flat_weight_refs = [None if w is None else weakref.ref(w) for w in mod._flat_weights]
        return x
    if isinstance(x, torch.Tensor) and not isinstance(x, OnDevice):
        return OnDevice(x.detach())
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v) for v in x)
    if isinstance(x, dict):
        return {k: to_device(v) for k, v in x.items()}
    return x


def report(x: Any) -> tuple[object, object]:
    """(the value with every tensor a plain CPU one, where each tensor was: "cuda" on the stand-in, else its
    device type), for the judge to check both."""
    if isinstance(x, OnDevice):
        return torch.Tensor.detach(x.value).clone(), DEVICE.type
    if type(x) in (torch.Tensor, torch.nn.Parameter):
        return x, "cpu" if x.device.type == "cpu" else x.device.type
    if isinstance(x, (list, tuple)):
        pairs = [report(v) for v in x]
        return _rebuilt(x, [p[0] for p in pairs]), _rebuilt(x, [p[1] for p in pairs])
    if isinstance(x, dict):
        named = {k: report(v) for k, v in x.items()}
        return {k: p[0] for k, p in named.items()}, {k: p[1] for k, p in named.items()}
    return x, None


def call(fn, args: list, kwargs: dict, grad: bool = True) -> tuple[object, object]:
    """Call `fn` (with its module, already on the stand-in device: see to_device) on `args` moved there, under the
    stand-in mode; (values, devices)."""
    args, kwargs = to_device(list(args)), to_device(dict(kwargs))
    with StandIn(), torch.set_grad_enabled(grad):
        out = fn(*args, **kwargs)
    return report(out)


# torch wraps a dispatch mode's __torch_dispatch__ so that torch.compile never traces into it, and that wrapper
# imports torch._dynamo (about a second of CPU) at its first call; nothing here is compiled, so the wrapper may call
# the method as it is, and a worker that does not train needs no torch._dynamo (worker_forkserver.optim_ready)
_raw = getattr(StandIn.__torch_dispatch__, "__wrapped__", None)
if _raw is not None:
    _raw.__dynamo_disable = _raw
