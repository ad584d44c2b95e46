"""The stand-in CUDA device of the device cases (grader/worker/standin_cuda.py): it looks like CUDA, checks devices as CUDA
does, keeps real values, and never touches a GPU, so the device point is decided the same on every machine."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.judge.reference_code import load_reference
from grader.worker import standin_cuda

from helpers import REFERENCE

REF = load_reference(REFERENCE)
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


@pytest.mark.parametrize("cpu_lengths", [True, False])
def test_packing_runs_there_with_its_lengths_on_the_cpu(cpu_lengths):
    src, *_ = inputs()
    cpu = Packed(cpu_lengths)
    there = copy.deepcopy(cpu)
    values, devices = on_device(there, src, module=there)
    assert devices == ("cuda", "cuda")
    assert all(torch.allclose(v, w, atol=1e-6) for v, w in zip(values, cpu(src)))


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
