"""The stand-in CUDA device of the device cases (grader/worker/standin_cuda.py): it looks like CUDA, checks devices as CUDA
does, keeps real values, and never touches a GPU, so the device point is decided the same on every machine."""
from __future__ import annotations

import collections
import copy
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.judge.reference_code import load_reference
from grader.worker import standin_cuda

from helpers import REFERENCE

REF = load_reference(REFERENCE)
_SPEC = importlib.util.spec_from_file_location("device_table",
                                               Path(__file__).resolve().parents[2] / "bench" / "device_table.py")
TABLE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(TABLE)  # the rules' table, which bench/device_table.py also runs on a real GPU
B, T, E, H, V = 3, 7, 5, 6, 11


def inputs():
    torch.manual_seed(0)
    n = torch.tensor([T, 5, 3])
    mask = torch.arange(T)[None, :] < n[:, None]
    src = torch.randint(1, V, (B, T)).masked_fill(~mask, 0)
    return src, mask, torch.randn(B, T, H), torch.randn(B, H), torch.randint(1, V + 2, (B, 5))


def on_device(fn, *args, module: nn.Module | None = None):
    if module is not None:
        standin_cuda.to_device(module)
    return standin_cuda.call(fn, list(args), {})


def flat(x):
    return [u for t in (x if isinstance(x, tuple) else (x,)) for u in (flat(t) if isinstance(t, tuple) else [t])]


def test_the_stand_in_says_cuda_and_not_meta():
    seen = {}

    def look(x):
        seen.update(device=x.device, type=x.device.type, is_cuda=x.is_cuda, is_meta=x.is_meta, is_cpu=x.is_cpu,
                    index=x.get_device(), made=torch.zeros(2, device=x.device).device)
        return x

    on_device(look, torch.ones(2))
    assert seen == {"device": torch.device("cuda", 0), "type": "cuda", "is_cuda": True, "is_meta": False,
                    "is_cpu": False, "index": 0, "made": torch.device("cuda", 0)}


@pytest.mark.parametrize("name", ["encoder", "additive", "luong", "context", "decoder", "step"])
def test_the_reference_runs_there_with_its_cpu_values_and_every_answer_on_the_device(name):
    src, mask, enc, q, tgt = inputs()
    alpha = torch.softmax(torch.randn(B, T), -1)
    cases = {
        "encoder": (lambda: REF.encoder.EncoderAll(V, E, H), None, (src,)),
        "additive": (lambda: REF.additive.BahdanauAttention(H), None, (enc, q, mask)),
        "luong": (lambda: REF.luong.LuongDotAttention(), None, (enc, q, mask)),
        "context": (None, REF.context.attention_context, (alpha, enc)),
        "decoder": (lambda: REF.decoder.Seq2SeqAttn(V, V + 2, E, H), None, (src, mask, tgt)),
        "step": (lambda: REF.decoder.AttnDecoder(V, E, H), "forward_step", (tgt[:, :1], (q, q.flip(0)), enc, mask)),
    }
    make, fn, args = cases[name]
    if make is None:
        want, (values, devices) = fn(*args), on_device(fn, *args)
    else:
        cpu = make()
        there = copy.deepcopy(cpu)
        call = getattr(there, fn) if isinstance(fn, str) else there
        want = getattr(cpu, fn)(*args) if isinstance(fn, str) else cpu(*args)
        values, devices = on_device(call, *args, module=there)
    assert set(flat(devices)) == {"cuda"}
    assert all(type(v) is torch.Tensor and v.device.type == "cpu" for v in flat(values))
    assert all(torch.allclose(v, w, atol=1e-6) for v, w in zip(flat(values), flat(want)))


def test_a_tensor_made_without_device_fails_as_on_cuda_and_one_left_on_the_cpu_is_named():
    _, _, enc, _, _ = inputs()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        on_device(lambda x: x + torch.zeros(x.shape), enc)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        on_device(lambda x: x * torch.tensor([2.0] * H), enc)  # one dimension: not a scalar
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        on_device(lambda x: x + torch.ones(H, device=torch.get_default_device()), enc)

    def buffer_on_the_cpu(x):
        out = torch.zeros(x.shape)  # a copy into it is allowed, as on CUDA: the answer stays on the CPU
        out[:, 0] = x[:, 0]
        return out

    assert on_device(buffer_on_the_cpu, enc)[1] == "cpu"
    assert on_device(lambda x: x.cpu(), enc)[1] == "cpu"


@pytest.mark.parametrize("make", [
    lambda x: x.masked_fill(x > 0, torch.tensor(float("-inf"))),  # a CPU scalar joins any device
    lambda x: x + torch.zeros(x.shape, device=x.device),
    lambda x: x + x.new_zeros(x.shape) + torch.zeros_like(x) + x.new_tensor([1.0] * H),
    lambda x: x + torch.tensor([1.0] * H, device=x.device) + torch.as_tensor([1.0] * H, device=x.device),
    lambda x: x + torch.ones(H).to(x.device) + torch.ones(H).to(x) + torch.ones(H).type_as(x),
    lambda x: x[torch.tensor([0, 2])],  # CPU indices, as CUDA allows
    lambda x: x * x.sum().item() + torch.tensor(x.sum(-1).tolist(), device=x.device)[..., None],
    lambda x: torch.where(x > 0, x, torch.full_like(x, -1e9)).softmax(-1),
    lambda x: F.scaled_dot_product_attention(x[:, :1], x, x),
], ids=["cpu scalar", "device=", "like and new", "tensor with device=", "to", "cpu indices", "item and tolist",
        "where", "sdpa"])
def test_device_agnostic_code_runs_there_and_stays_there(make):
    _, _, enc, _, _ = inputs()
    values, devices = on_device(make, enc)
    assert devices == "cuda"
    assert torch.allclose(values, make(enc), equal_nan=True)


class Packed(nn.Module):
    def __init__(self, lengths_on_the_cpu: bool) -> None:
        super().__init__()
        self.embed, self.rnn = nn.Embedding(V, E, padding_idx=0), nn.LSTM(E, H, batch_first=True)
        self.cpu_lengths = lengths_on_the_cpu

    def forward(self, src):
        lengths = (src != 0).sum(1)  # on the device it is moved by torch itself
        p = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths.cpu() if self.cpu_lengths else lengths,
                                              batch_first=True, enforce_sorted=False)
        out, (h, c) = self.rnn(p)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.size(1))[0], h


def test_packing_runs_there_with_its_lengths_on_the_cpu():
    src, *_ = inputs()
    cpu = Packed(lengths_on_the_cpu=True)
    there = copy.deepcopy(cpu)
    values, devices = on_device(there, src, module=there)
    assert devices == ("cuda", "cuda")
    assert all(torch.allclose(v, w, atol=1e-6) for v, w in zip(values, cpu(src)))


def test_packing_with_its_lengths_on_the_device_fails_in_torchs_words():
    """The commonest packing bug: real torch refuses lengths on the device (its C++ check in _pack_padded_sequence),
    and so does the stand-in; on d06e8c5 it let them through."""
    src, *_ = inputs()
    there = Packed(lengths_on_the_cpu=False)
    with pytest.raises(RuntimeError, match=r"^'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 "
                                           r"Long tensor$"):
        on_device(there, src, module=there)


@pytest.mark.parametrize("row", TABLE.ROWS, ids=[r.name for r in TABLE.ROWS])
def test_each_row_of_the_device_table_gets_the_verdict_cuda_gives(row):
    """bench/device_table.py: a snippet legal on CUDA runs on the stand-in with the CPU's values and every answer on
    the device; one illegal on CUDA raises there. Eleven of these rows got the wrong verdict on d06e8c5."""
    legal, values, devices = TABLE.on_standin(row)
    assert legal == row.legal, f"{row.name}: {'refused' if not legal else 'let through'} on the stand-in: {values}"
    if legal:
        assert set(flat(devices)) == {"cuda"}
        assert torch.allclose(values, TABLE.on_cpu(row), equal_nan=True)


@pytest.mark.parametrize("code", [
    "torch.zeros(B, T)[mask]",
    "set_item(torch.zeros(B, T), mask, 1.0)",
], ids=["cpu[device mask]", "cpu[device mask] = value"])
def test_a_cpu_tensor_indexed_by_device_indices_fails_in_torchs_words(code):
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device as the indexed "
                                           r"tensor \(cpu\)"):
        standin_cuda.call(TABLE.function(TABLE.Row("", code, False)), [], TABLE.inputs())


@pytest.mark.parametrize("make", [
    lambda x: x.index_select(1, torch.tensor(0)),
    lambda x: F.embedding(torch.tensor(1), x[0]),
    lambda x: x.flatten().gather(0, torch.tensor(0)),
    lambda x: torch.stack([x[0, 0, 0], torch.tensor(0.0)]),
    lambda x: F.linear(x[0], x[0, :H], torch.tensor(0.5)),
], ids=["index_select", "embedding", "gather", "stack", "addmm"])
def test_a_cpu_scalar_outside_elementwise_operations_is_a_mismatch(make):
    _, _, enc, _, _ = inputs()
    make(enc)  # right on the CPU
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, cuda:0 and cpu!"):
        on_device(make, enc)


def test_a_list_by_keyword_and_a_third_device_are_checked_as_the_rest():
    """A list of CPU tensors passed by keyword (out=[...]) is checked as a positional list is; a third device type
    (meta here; a real GPU's beside the stand-in the same) is a mismatch in torch's words, not an error of the CPU
    values underneath."""
    _, _, enc, _, _ = inputs()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        on_device(lambda x: torch.split_with_sizes_copy(x, [2, 1], out=[torch.empty(2, T, H), torch.empty(1, T, H)]),
                  enc)
    meta = torch.empty(1, H, device="meta")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, cuda:0 and meta!"):
        on_device(lambda x: x[0] + meta, enc)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, cuda:0 and cpu!"):
        on_device(lambda x: torch.cat([x[0], torch.zeros(1, H), meta]), enc)


Pair = collections.namedtuple("Pair", "context alpha")


def test_a_namedtuple_comes_back_in_its_form_and_torchs_return_types_too():
    _, _, enc, _, _ = inputs()
    values, devices = on_device(lambda x: Pair(x.sum(1), x.softmax(-1)), enc)
    assert type(values) is Pair and devices == Pair("cuda", "cuda")
    assert torch.allclose(values.context, enc.sum(1)) and torch.allclose(values.alpha, enc.softmax(-1))
    values, devices = on_device(lambda x: x.max(-1), enc)
    assert tuple(devices) == ("cuda", "cuda") and torch.equal(values[0], enc.max(-1).values)


def test_special_casing_meta_finds_no_meta_and_the_values_are_the_real_ones():
    _, _, enc, _, _ = inputs()

    def special(x):
        if x.device.type == "meta":
            return torch.empty(x.shape, device="meta")
        return x * 2

    values, devices = on_device(special, enc)
    assert devices == "cuda" and torch.equal(values, enc * 2)


def test_nothing_touches_cuda_and_nothing_is_left_switched_on():
    src, mask, _, _, tgt = inputs()
    model = REF.decoder.Seq2SeqAttn(V, V + 2, E, H)
    lifted = torch._C._only_lift_cpu_tensors()
    on_device(model, src, mask, tgt, module=model)
    assert not torch.cuda.is_initialized()
    assert torch._C._only_lift_cpu_tensors() == lifted
    assert torch.zeros(2).device.type == "cpu" and type(torch.zeros(2) + 1) is torch.Tensor
