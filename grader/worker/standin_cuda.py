"""A stand-in CUDA device for the device cases: the same on every machine, with values, and not `meta`.

The device cases ask whether code that runs right on the CPU also keeps every tensor it makes on its
inputs' device. A real GPU answers that only where there is one; the `meta` device has no values and
announces itself (`x.device.type == "meta"`), so code can special-case it. Here the inputs, the module's
parameters and buffers, and every tensor made from them are `OnDevice` tensors: each holds a real CPU
tensor with the values, and says that it is on `cuda:0` (`x.device`, `x.is_cuda`, `x.get_device()`).
Every operation runs on the CPU values, after the check real CUDA makes: all tensors of an operation on
one device, but for CPU tensors of no dimension (scalars), the indices of an indexing operation, the
source of a copy, and the lengths and batch sizes of packed sequences, which torch keeps on the CPU. A
tensor made without `device=` (`torch.zeros(B, T)`) is a plain CPU tensor, and mixing it with the inputs
raises torch's own "Expected all tensors to be on the same device" error; an answer left on the CPU
comes back marked as such. Nothing touches CUDA: underneath, torch sees a `meta` tensor (no CUDA device
guard, no CUDA initialization), so a machine without a GPU and one with a GPU decide the same.

Used by the worker's "probe" command (grader.worker.runtime); holds no case, expected value or score.
"""
from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

DEVICE = torch.device("cuda", 0)
_CPU = torch.device("cpu")
# operations whose tensor arguments may be on the CPU beside device tensors (as on real CUDA): {op: indices
# of the arguments that may be}; indexing takes CPU indices, a copy a source anywhere
_MIXED = {
    "index.Tensor": {1}, "index_put_.default": {1}, "index_put.default": {1}, "_index_put_impl_.default": {1},
    "copy_.default": {1}, "_copy_from.default": {0, 1}, "_copy_from_and_resize.default": {0, 1},
    "_pack_padded_sequence.default": {1}, "_pad_packed_sequence.default": {1},
}
# outputs that stay on the CPU whatever the input's device: a packed sequence's batch sizes, padded lengths
_CPU_OUTPUTS = {"_pack_padded_sequence.default": {1}, "_pad_packed_sequence.default": {1}}


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


def _target(device: object) -> str | None:
    """Where a `device=` argument puts a tensor: the stand-in for cuda (and meta, which is what torch's own
    C++ passes on for an OnDevice tensor's options), the CPU otherwise."""
    if device is None:
        return None
    return "device" if torch.device(device).type in ("cuda", "meta") else "cpu"


def _unwrap(x: object) -> object:
    return x.value if isinstance(x, OnDevice) else x


def run(func, args: tuple, kwargs: dict):
    name = f"{func._schema.name.split('::')[-1]}.{func._overloadname}"
    target = _target(kwargs.get("device")) if "device" in kwargs else None
    if "device" in kwargs and kwargs["device"] is not None:
        kwargs = {**kwargs, "device": _CPU}
    mixed = _MIXED.get(name, set())
    devices: set[str] = set()
    for i, a in enumerate(args):
        if i in mixed:
            continue
        for t in tree_flatten(a)[0] if isinstance(a, (list, tuple)) else [a]:
            d = _device_of(t)
            if d == "cpu" and t.dim() == 0:  # a CPU scalar joins any device, as on CUDA
                continue
            if d is not None:
                devices.add(d)
    for k, v in kwargs.items():
        d = _device_of(v)
        if d is not None and not (d == "cpu" and v.dim() == 0):
            devices.add(d)
    if target is None and devices == {"cpu", "device"}:
        raise DeviceMismatch(f"Expected all tensors to be on the same device, but found at least two devices, "
                             f"{DEVICE} and cpu! (in {name.split('.')[0]})")
    on_device = target == "device" if target is not None else "device" in devices
    if target is None and not devices and any(isinstance(t, OnDevice) for t in tree_flatten((args, kwargs))[0]):
        on_device = True  # only scalars of the device among the arguments
    if name.split(".")[0].endswith("_") and args and isinstance(args[0], OnDevice):  # in place: the same tensor
        func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        return args[0]
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    if not on_device:
        return out
    cpu_outputs = _CPU_OUTPUTS.get(name, set())
    if isinstance(out, (tuple, list)):
        return type(out)(o if i in cpu_outputs or not isinstance(o, torch.Tensor) else OnDevice(o)
                         for i, o in enumerate(out))
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


def report(x: object) -> tuple[object, object]:
    """(the value with every tensor a plain CPU one, where each tensor was: "cuda" on the stand-in, else its
    device type), for the judge to check both."""
    if isinstance(x, OnDevice):
        return torch.Tensor.detach(x.value).clone(), DEVICE.type
    if type(x) in (torch.Tensor, torch.nn.Parameter):
        return x, "cpu" if x.device.type == "cpu" else x.device.type
    if isinstance(x, (list, tuple)):
        pairs = [report(v) for v in x]
        return type(x)(p[0] for p in pairs), type(x)(p[1] for p in pairs)
    if isinstance(x, dict):
        pairs = {k: report(v) for k, v in x.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    return x, None


def call(fn, args: list, kwargs: dict, grad: bool = True) -> tuple[object, object]:
    """Call `fn` (with its module, already on the stand-in device: see to_device) on `args` moved there, under the
    stand-in mode; (values, devices)."""
    args, kwargs = to_device(list(args)), to_device(dict(kwargs))
    with StandIn(), torch.set_grad_enabled(grad):
        out = fn(*args, **kwargs)
    return report(out)
