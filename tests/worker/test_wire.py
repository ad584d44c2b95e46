"""The wire between judge and worker (grader/worker/wire.py) on its own: what it carries there and back,
and what the judge refuses to open. No worker runs: frames go through a pipe or a socket pair."""
from __future__ import annotations

import io
import math
import os
import socket
import time
import warnings
import zipfile

import pytest
import torch

from grader.worker import wire

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64"]


def through_pipe(obj: object, limit: int = wire.MAX_FRAME) -> object:
    """`obj` sent as one frame and read back as the judge reads a worker's answer (the restricted unpickler)."""
    r, w = os.pipe()
    try:
        wire.send(w, obj)
        os.close(w)
        w = None
        return wire.recv(r, time.monotonic() + 30, limit=limit)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def raw_frame(data: bytes, header: int | None = None) -> object:
    """`data` as a frame payload (with a header saying `header` bytes, its length by default), read as the judge."""
    r, w = os.pipe()
    try:
        os.write(w, wire.HEADER.pack(len(data) if header is None else header) + data)
        os.close(w)
        w = None
        return wire.recv(r, time.monotonic() + 30)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def round_trip(value: object) -> object:
    return wire.decode(through_pipe(wire.encode(value)))


def a_tensor(dtype: str) -> torch.Tensor:
    values = torch.tensor([[0, 1, -2], [3, -4, 5]], dtype=torch.float64) * 1.5
    if dtype == "bool":
        return values > 0
    if dtype == "uint8":
        return values.abs().to(torch.uint8)
    if dtype == "complex64":
        return torch.complex(values, -values).to(torch.complex64)
    return values.to(getattr(torch, dtype))


def tensor_frame(data, dtype: str = "float32", shape=(2, 3), device: str = "cpu") -> dict:
    """A tensor as a worker could tag it, whatever `data` really is."""
    return {"__kind__": "tensor", "device": device, "dtype": dtype, "shape": list(shape), "data": data}


# ---- what it carries ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_a_tensor_of_every_dtype_comes_back_with_its_values_dtype_and_shape(dtype):
    sent = a_tensor(dtype)
    got = round_trip(sent)
    assert type(got) is torch.Tensor and got.dtype == sent.dtype and got.shape == (2, 3)
    assert torch.equal(got, sent)
    assert got.data_ptr() != sent.data_ptr() and not hasattr(got, "far_device")


def test_a_strided_view_a_parameter_and_a_tensor_that_needs_grad_come_back_as_plain_detached_copies():
    base = torch.arange(12.0).reshape(3, 4)
    view = base.t()[1:]  # (3, 3), not contiguous
    param = torch.nn.Parameter(torch.ones(2, 2))
    leaf = torch.full((2,), 3.0, requires_grad=True)
    got = round_trip((view, param, leaf * 2))
    assert [type(t) for t in got] == [torch.Tensor] * 3
    assert torch.equal(got[0], view) and got[0].is_contiguous()
    assert torch.equal(got[1], torch.ones(2, 2)) and not got[1].requires_grad
    assert torch.equal(got[2], torch.full((2,), 6.0)) and got[2].grad_fn is None


def test_a_meta_tensor_comes_back_as_a_meta_tensor_of_its_shape_and_dtype_without_data():
    sent = torch.empty(4, 5, dtype=torch.float16, device="meta")
    frame = wire.encode(sent)
    assert frame["data"] is None and frame["device"] == "meta"
    got = wire.decode(through_pipe(frame))
    assert got.device.type == "meta" and got.shape == (4, 5) and got.dtype == torch.float16


def test_a_tensor_tagged_as_held_on_a_gpu_arrives_on_the_cpu_saying_where_it_was():
    got = wire.decode(through_pipe(tensor_frame(torch.zeros(2, 3), device="cuda")))
    assert got.device.type == "cpu" and got.far_device == "cuda"


def test_nested_tuples_lists_dicts_none_strings_and_numbers_come_back_equal_and_of_the_same_types():
    value = {
        "none": None, "flags": [True, False], "ints": (0, -7, 2**40), "floats": [0.5, -1e-30, float("inf")],
        "text": "héllo ✓ 😀", 3: ("three", [None, (1, [2, {"deep": (torch.ones(1),)}])]), 1.5: [], None: (),
    }
    got = round_trip(value)
    assert list(got) == list(value)
    torch.testing.assert_close(got[3][1][1][1][1]["deep"][0], torch.ones(1))
    got[3][1][1][1][1]["deep"] = value[3][1][1][1][1]["deep"] = None  # the rest compares with ==, types included

    def shape_of(v):
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [shape_of(x) for x in v])
        if isinstance(v, dict):
            return ("dict", [(shape_of(k), shape_of(x)) for k, x in v.items()])
        return (type(v).__name__, v)

    assert shape_of(got) == shape_of(value)
    assert math.isinf(got["floats"][2])


def test_a_nan_survives_the_trip():
    assert math.isnan(round_trip(float("nan")))
    assert round_trip(torch.tensor([float("nan"), 1.0])).isnan().tolist() == [True, False]


def test_an_object_that_cannot_travel_arrives_as_its_type_name_only():
    class Secret:
        answer = 42

    class Sub(torch.Tensor):  # a tensor subclass is not a plain tensor: only its name travels
        pass

    got = round_trip([Secret(), torch.zeros(2).as_subclass(Sub), {1, 2}])
    assert [type(x) for x in got] == [wire.Opaque] * 3
    assert [x.type_name for x in got] == ["Secret", "Sub", "set"]
    assert repr(got[0]) == "<Secret>"


def test_a_ref_is_resolved_only_by_the_side_that_holds_the_objects():
    frame = through_pipe(wire.encode([wire.Ref("m0"), 1]))
    assert wire.decode(frame, refs=lambda name: f"object {name}") == ["object m0", 1]
    with pytest.raises(wire.WireError, match="unknown tag 'ref'"):
        wire.decode(frame)  # no refs here: the judge never turns a worker's name into one of its objects


def test_text_is_cut_to_max_text():
    assert round_trip("x" * (wire.MAX_TEXT + 500)) == "x" * wire.MAX_TEXT


def nested_lists(levels: int) -> object:
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def test_twenty_levels_of_nesting_come_back_and_encode_cuts_deeper_values_to_a_marker_the_judge_refuses():
    assert round_trip(nested_lists(20)) == nested_lists(20)
    frame = wire.encode(nested_lists(25))
    for _ in range(21):
        frame = frame["items"][0]
    assert frame == {"__kind__": "object", "type": "nested too deeply"}  # encode stops: a cycle cannot recurse forever
    with pytest.raises(wire.WireError, match="nested too deeply"):
        round_trip(nested_lists(21))  # the marker sits one level past what decode opens


def test_a_frame_crosses_a_socket_pair_as_it_crosses_a_pipe():
    a, b = socket.socketpair()
    with a, b:
        wire.send(a, wire.encode({"x": (torch.arange(3), "y")}))
        got = wire.decode(wire.recv(b, time.monotonic() + 30))
    assert torch.equal(got["x"][0], torch.arange(3)) and got["x"][1] == "y"


# ---- what it refuses ----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["to_sparse", "to_sparse_csr"])
def test_a_sparse_tensor_is_refused(layout):
    dense = torch.arange(6.0).reshape(2, 3)
    frame = through_pipe(tensor_frame(getattr(dense, layout)()))  # the restricted unpickler opens it ...
    with pytest.raises(wire.WireError, match="not a plain dense one"):
        wire.decode(frame)  # ... and decode refuses it


@pytest.mark.parametrize("claimed", ["uint8", "float32"])
def test_a_quantized_tensor_is_refused_whatever_dtype_it_claims(claimed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated, and still unpickled
        q = torch.quantize_per_tensor(torch.arange(6.0).reshape(2, 3), 0.1, 0, torch.quint8)
    frame = through_pipe(tensor_frame(q, dtype=claimed))
    with pytest.raises(wire.WireError, match="not a plain dense one"):
        wire.decode(frame)


def test_a_nested_tensor_is_refused_as_a_bad_frame():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    frame = through_pipe(tensor_frame(nested))
    with pytest.raises(wire.WireError):
        wire.decode(frame)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: torch.zeros(1).expand(2, 3), id="an expanded tensor (stride 0)"),
    pytest.param(lambda: torch.zeros(3, 2).t(), id="a transposed view"),
])
def test_a_tensor_not_laid_out_as_encode_sends_it_is_refused(make):
    frame = through_pipe(tensor_frame(make()))  # the view survives the restricted unpickler ...
    assert not frame["data"].is_contiguous()
    with pytest.raises(wire.WireError, match="not laid out as sent"):
        wire.decode(frame)  # ... and is refused before a clone could grow it


def test_tensors_that_add_up_past_the_frame_limit_are_refused_even_when_they_share_one_storage():
    quarter = torch.zeros(wire.MAX_FRAME // 4 // 4)  # float32: a quarter of MAX_FRAME in bytes
    items = [tensor_frame(quarter, shape=quarter.shape)]
    assert len(wire.decode({"__kind__": "list", "items": items * 3})) == 3
    with pytest.raises(wire.WireError, match=f"hold over {wire.MAX_FRAME} bytes"):
        wire.decode({"__kind__": "list", "items": items * 5})  # one storage in the frame, five rebuilt


def test_a_compressed_answer_frame_is_refused_before_it_is_opened():
    buf = io.BytesIO()
    torch.save({"__kind__": "list", "items": []}, buf)
    plain = buf.getvalue()
    wire._stored_only(plain, wire.MAX_FRAME)  # what torch.save writes is opened
    packed = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(plain)) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    with pytest.raises(wire.WireError, match="compressed"):
        wire._stored_only(packed.getvalue(), wire.MAX_FRAME)
    r, w = os.pipe()
    os.write(w, wire.HEADER.pack(len(packed.getvalue())) + packed.getvalue())
    os.close(w)
    with pytest.raises(wire.WireError):
        wire.recv(r)
    os.close(r)


def test_a_frame_whose_records_add_up_past_the_limit_is_refused_unopened():
    buf = io.BytesIO()
    torch.save(torch.zeros(1000), buf)
    wire._stored_only(buf.getvalue(), wire.MAX_FRAME)
    with pytest.raises(wire.WireError, match="oversized"):
        wire._stored_only(buf.getvalue(), 3000)  # 4000 bytes of tensor data in stored records


def test_a_header_over_the_limit_is_refused_before_the_frame_is_read():
    r, w = os.pipe()
    try:
        os.write(w, wire.HEADER.pack(wire.MAX_FRAME + 1))  # and nothing after it: reading on would block
        with pytest.raises(wire.WireError, match=f"over the {wire.MAX_FRAME}-byte limit"):
            wire.recv(r, time.monotonic() + 5)
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(wire.WireError, match="over the 100-byte limit"):
        through_pipe(wire.encode(torch.zeros(100)), limit=100)


def test_a_frame_that_is_not_a_torch_save_zip_is_refused():
    with pytest.raises(wire.WireError, match="not a torch.save frame"):
        raw_frame(b"not a zip at all")


def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    buf = io.BytesIO()
    torch.save(Evil(), buf)
    with pytest.raises(wire.WireError, match="not plain data"):
        raw_frame(buf.getvalue())
    assert not marker.exists()
    r, w = os.pipe()  # the same frame from the judge (trusted: a worker's requests) is opened in full
    os.write(w, wire.HEADER.pack(len(buf.getvalue())) + buf.getvalue())
    os.close(w)
    wire.recv(r, trusted=True)
    os.close(r)
    assert marker.is_dir()


@pytest.mark.parametrize("frame, says", [
    pytest.param(tensor_frame(None, dtype="float32", shape=(2**13, 2**12), device="meta"), "too large", id="too many elements"),
    pytest.param(tensor_frame(torch.zeros(2, 3), dtype="qint8"), "unknown dtype", id="an unknown dtype"),
    pytest.param(tensor_frame(torch.zeros(2, 3), shape=(2, -3)), "malformed shape", id="a negative size"),
    pytest.param(tensor_frame(torch.zeros([1] * 9), shape=[1] * 9), "malformed shape", id="nine dimensions"),
    pytest.param(tensor_frame(torch.zeros(3, 2)), "does not match", id="data of another shape"),
    pytest.param(tensor_frame(torch.zeros(2, 3, dtype=torch.float64)), "does not match", id="data of another dtype"),
    pytest.param(tensor_frame([0.0] * 6), "does not match", id="a list for data"),
    pytest.param([1, 2], "untagged list", id="an untagged list"),
    pytest.param({"__kind__": "code", "items": []}, "unknown tag 'code'", id="an unknown tag"),
    pytest.param({"__kind__": "tuple", "items": "ab"}, "without items", id="items that are not a list"),
    pytest.param({"__kind__": "dict", "items": [[1, 2, 3]]}, "without pairs", id="a dict of triples"),
    pytest.param({"__kind__": "dict", "items": [[{"__kind__": "tuple", "items": [1]}, 2]]}, "dict key",
                 id="a tuple as a dict key"),
])
def test_a_malformed_value_is_refused_with_a_reason(frame, says):
    with pytest.raises(wire.WireError, match=says):
        wire.decode(through_pipe(frame))


def test_nesting_past_twenty_levels_is_refused_when_decoding():
    deep: object = None
    for _ in range(22):
        deep = {"__kind__": "list", "items": [deep]}
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.decode(deep)


def test_shared_references_cannot_unfold_into_an_exponential_number_of_values():
    leaf: object = {"__kind__": "list", "items": [0]}
    for _ in range(18):  # each level holds the one below twice: 2**18 leaves from 19 objects
        leaf = {"__kind__": "list", "items": [leaf, leaf]}
    frame = through_pipe(leaf)
    start = time.monotonic()
    with pytest.raises(wire.WireError, match="too many values"):
        wire.decode(frame)
    assert time.monotonic() - start < 5
    with pytest.raises(wire.WireError, match="too many values"):
        wire.decode({"__kind__": "list", "items": [0] * wire.MAX_NODES})


def test_a_frame_cut_short_says_the_connection_closed_and_a_silent_one_misses_its_deadline():
    r, w = os.pipe()
    os.write(w, wire.HEADER.pack(100) + b"only part")
    os.close(w)
    with pytest.raises(wire.Closed):
        wire.recv(r, time.monotonic() + 5)
    os.close(r)
    r, w = os.pipe()
    try:
        start = time.monotonic()
        with pytest.raises(wire.Deadline):
            wire.recv(r, time.monotonic() + 0.2)
        assert 0.15 < time.monotonic() - start < 5
    finally:
        os.close(r)
        os.close(w)
