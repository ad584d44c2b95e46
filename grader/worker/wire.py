"""Frames and values between the judge and a worker: data only, decoded safely, bounded in size.

A frame is an 8-byte length and a `torch.save` payload that the reader opens with
`torch.load(weights_only=True)`: tensors, numbers, strings, lists and dicts, never code. Values
are tagged plainly (tuples, tensors off the CPU, objects that cannot travel) so the judge can
check types itself instead of trusting whatever object the worker built.
"""
from __future__ import annotations

import io
import os
import select
import socket
import struct
import time
from typing import Callable, Union

import torch

HEADER = struct.Struct(">Q")
MAX_FRAME = 64 * 2**20  # a case's tensors are kilobytes; a trained model's state about a megabyte
MAX_TEXT = 2000
MAX_ELEMENTS = 2**24
PLAIN = (torch.Tensor, torch.nn.Parameter)


class WireError(Exception):
    """The other side sent something that is not a well-formed frame; str() says what."""


class Deadline(WireError):
    """No complete answer before the deadline."""


class Closed(WireError):
    """The other side closed the connection (a worker that exited or was killed)."""


Channel = Union[int, socket.socket]  # a descriptor (a fork server's socketpair) or a socket (spawned workers, any OS)
Until = Union[float, Callable[[], float], None]  # when to give up (time.monotonic()), fixed or moving


def send(fd: Channel, obj: object) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    _write_all(fd, HEADER.pack(len(data)) + data)


def _write_all(fd: Channel, data: bytes) -> None:
    if isinstance(fd, socket.socket):  # Windows cannot os.write a socket
        fd.sendall(data)
        return
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def recv(fd: Channel, deadline: Until = None, limit: int = MAX_FRAME, on_idle=None, trusted: bool = False) -> object:
    """Read one frame before `deadline` (time.monotonic(), or a function giving it: a deadline that moves while
    waiting); `on_idle(fd, timeout)` waits for it.

    trusted: the frame comes from the judge (a worker reading its requests), so the full unpickler,
    three times faster, may open it; the judge itself always uses the restricted one."""
    size = HEADER.unpack(_read(fd, HEADER.size, deadline, on_idle))[0]
    if size > limit:
        raise WireError(f"an answer of {size} bytes, over the {limit}-byte limit")
    data = _read(fd, size, deadline, on_idle)
    if not trusted:
        _stored_only(data, limit)
    try:
        return torch.load(io.BytesIO(data), weights_only=not trusted, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - anything the restricted unpickler refuses is just a bad frame
        raise WireError(f"an answer that is not plain data ({type(e).__name__})") from None


def _stored_only(data: bytes, limit: int) -> None:
    """torch.save stores its records uncompressed; a deflated one could inflate a small frame into gigabytes
    inside torch.load, so only stored records adding up to at most `limit` bytes are opened."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise WireError(f"an answer that is not a torch.save frame ({type(e).__name__})") from None
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or sum(i.file_size for i in infos) > limit:
        raise WireError("an answer with compressed or oversized records")


def _read(fd: Channel, n: int, deadline: Until, on_idle) -> bytes:
    chunks, got = [], 0
    while got < n:
        wait = None if deadline is None else (deadline() if callable(deadline) else deadline) - time.monotonic()
        if wait is not None and wait <= 0:
            raise Deadline("no answer in time")
        if on_idle is not None:
            on_idle(fd, wait)
        ready, _, _ = select.select([fd], [], [], 0 if on_idle is not None else wait)
        if not ready:
            continue
        want = min(n - got, 1 << 20)
        chunk = fd.recv(want) if isinstance(fd, socket.socket) else os.read(fd, want)
        if not chunk:
            raise Closed("the connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# ---- values ----


def encode(value: object, depth: int = 0) -> object:
    """A plain-data form of `value` (used on both sides; the judge never trusts it blindly)."""
    if depth > 20:
        return {"__kind__": "object", "type": "nested too deeply"}
    if value is None or type(value) in (bool, int, float):
        return value
    if type(value) is str:
        return value[:MAX_TEXT]
    if type(value) in PLAIN:
        t = torch.Tensor.detach(value)  # the class's methods: an instance attribute named `detach` is ignored
        data = None if t.device.type == "meta" else torch.Tensor.clone(torch.Tensor.cpu(t)).contiguous()
        return {"__kind__": "tensor", "device": t.device.type, "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape), "data": data}
    if type(value) is tuple:
        return {"__kind__": "tuple", "items": [encode(v, depth + 1) for v in value]}
    if type(value) is list:
        return {"__kind__": "list", "items": [encode(v, depth + 1) for v in value]}
    if type(value) is dict:
        return {"__kind__": "dict", "items": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, Ref):
        return {"__kind__": "ref", "name": value.name}
    return {"__kind__": "object", "type": type(value).__name__[:100]}


class Ref:
    """A name for an object that lives in the worker (a module the case built)."""

    def __init__(self, name: str) -> None:
        self.name = name


class Opaque:
    """Something the worker returned that cannot cross as data; only its type's name does."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


MAX_NODES = 100_000  # values one answer may rebuild: shared references cannot unfold into an exponential tree


def decode(obj: object, refs=None, depth: int = 0, budget: list[int] | None = None) -> object:
    """Rebuild a value from its plain-data form, checking every tag; anything malformed raises WireError."""
    budget = budget if budget is not None else [MAX_NODES, MAX_FRAME]  # values, and bytes of tensor data rebuilt
    budget[0] -= 1
    if budget[0] < 0:
        raise WireError("an answer with too many values")
    if depth > 20:
        raise WireError("nested too deeply")
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if type(obj) is not dict:
        raise WireError(f"an untagged {type(obj).__name__}")
    kind = obj.get("__kind__")
    if kind == "tensor":
        return _tensor(obj, budget)
    if kind in ("tuple", "list"):
        items = obj.get("items")
        if type(items) is not list:
            raise WireError("a sequence without items")
        out = [decode(v, refs, depth + 1, budget) for v in items]
        return tuple(out) if kind == "tuple" else out
    if kind == "dict":
        items = obj.get("items")
        if type(items) is not list or not all(type(p) is list and len(p) == 2 for p in items):
            raise WireError("a dict without pairs")
        out = {}
        for k, v in items:
            key = decode(k, refs, depth + 1, budget)
            if key is not None and type(key) not in (bool, int, float, str):
                raise WireError("a dict key that is not a number or a string")
            out[key] = decode(v, refs, depth + 1, budget)
        return out
    if kind == "object":
        return Opaque(str(obj.get("type", "?"))[:100])
    if kind == "ref" and refs is not None:
        return refs(str(obj.get("name")))
    raise WireError(f"an unknown tag {str(kind)[:40]!r}")


_DTYPES = {name: getattr(torch, name) for name in (
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64")}


def _tensor(obj: dict, budget: list[int]) -> torch.Tensor:
    shape, dtype, device, data = obj.get("shape"), obj.get("dtype"), obj.get("device"), obj.get("data")
    if type(shape) is not list or not all(type(n) is int and 0 <= n for n in shape) or len(shape) > 8:
        raise WireError("a tensor with a malformed shape")
    numel = 1
    for n in shape:
        numel *= n
    if numel > MAX_ELEMENTS or dtype not in _DTYPES or type(device) is not str:
        raise WireError("a tensor too large or of an unknown dtype")
    if device == "meta":
        return torch.empty(shape, dtype=_DTYPES[dtype], device="meta")
    if type(data) is not torch.Tensor:
        raise WireError("a tensor whose data does not match its shape")
    if data.layout is not torch.strided or data.is_quantized or data.is_nested:  # sparse, quantized, nested
        raise WireError("a tensor that is not a plain dense one (sparse, quantized or nested)")
    if list(data.shape) != shape or data.dtype != _DTYPES[dtype]:  # a nested tensor has no shape to read
        raise WireError("a tensor whose data does not match its shape")
    # encode sends each tensor contiguous, in a storage of its own size: anything else (a stride-0 view of one
    # element, many views of one storage) would make the clone below far larger than the frame that carried it
    size = numel * data.element_size()
    if not data.is_contiguous() or data.untyped_storage().nbytes() < data.storage_offset() * data.element_size() + size:
        raise WireError("a tensor whose data is not laid out as sent (a view or an expanded tensor)")
    budget[1] -= size
    if budget[1] < 0:
        raise WireError(f"an answer whose tensors hold over {MAX_FRAME} bytes")
    try:
        data = data.detach().clone()  # a fresh plain tensor: nothing of what was unpickled stays attached
    except (MemoryError, RuntimeError) as e:
        raise WireError(f"a tensor that could not be rebuilt ({type(e).__name__})") from None
    if device != "cpu":
        data.far_device = device  # type: ignore[attr-defined]  # where the worker held it (cuda)
    return data
