"""Small trained models the cases and plots need, with checksums and the command that rebuilds them.

`grade artifacts` retrains them from fixed seeds; the cases refuse a file whose checksum is off.
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Callable

import torch
import torch.nn as nn

from .. import ROOT
from . import toy, train

DIR = ROOT / "grader" / "artifacts"
SUMS = DIR / "SHA256SUMS.json"
# a half-trained reference model: mid-range accuracy, where evaluation mistakes change the numbers
EVAL_MODEL = ("eval_model.pt", train.TrainConfig(embed_dim=16, hidden_dim=32, batch_size=64, lr=0.01, max_steps=300,
                                                 short_steps=300, short_len=20, eval_every=10**9, target_acc=2.0, seed=11,
                                                 betas=(0.9, 0.999), clip=1.0, threads=1))
# accuracy by source length of the reference and of the no-attention baseline, for the plots
CURVES = ("curves.json", train.TrainConfig())
# where the graded training cases start: the reference's and Luong's models, every parameter, train.WARM_STEP
# steps into their runs from scratch (the runs whose test accuracy the curves record)
WARM = {"bahdanau": "warm_start.pt", "luong": "warm_start_luong.pt"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(ref) -> dict[str, str]:
    """Retrain every artifact with the reference (its namespace of piece modules) and record the checksums."""
    return {**build_eval_model(ref.decoder), **build_curves(ref.decoder.Seq2SeqAttn, ref.luong.LuongDotAttention)}


def _state_bytes(state: dict[str, torch.Tensor]) -> bytes:
    buf = io.BytesIO()
    torch.save({k: v.contiguous() for k, v in state.items()}, buf)
    return buf.getvalue()


def _verified(name: str) -> bytes:
    """An artifact's bytes, refused unless they match the checksum recorded for them."""
    data = (DIR / name).read_bytes()
    if _sha(data) != json.loads(SUMS.read_text()).get(name):
        raise RuntimeError(f"grader/artifacts/{name} does not match its checksum; rebuild it with `grade artifacts`")
    return data


def _record(name: str, data: bytes) -> dict[str, str]:
    """Write one artifact and merge its checksum into SHA256SUMS.json, leaving the others as they are."""
    DIR.mkdir(exist_ok=True)
    (DIR / name).write_bytes(data)
    sums = json.loads(SUMS.read_text()) if SUMS.exists() else {}
    sums[name] = _sha(data)
    SUMS.write_text(json.dumps(dict(sorted(sums.items())), indent=1) + "\n")
    return {name: sums[name]}


def build_eval_model(ref_decoder_module) -> dict[str, str]:
    """Retrain the half-trained evaluation model and record its checksum."""
    name, cfg = EVAL_MODEL
    torch.manual_seed(cfg.seed)
    model = ref_decoder_module.Seq2SeqAttn(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    train.train(model, cfg)
    return _record(name, _state_bytes(model.state_dict()))


def build_curves(attn_cls: type[nn.Module], luong_attn_cls: type[nn.Module],
                 progress: Callable[[str], None] | None = None) -> dict[str, str]:
    """Train the reference Seq2SeqAttn, Luong's model and the baseline with the grader's schedules; record
    test accuracy by length, and the warm starts of the graded training cases."""
    from .baseline import Seq2SeqBaseline
    from .evaluate import accuracy_by_length
    from .luong_model import Seq2SeqLuong

    name, cfg = CURVES
    test = toy.read_split("test")
    curves: dict[str, dict[str, float]] = {}
    out = {}
    models = (("reference", attn_cls, cfg, "bahdanau"),
              ("luong", lambda *a: Seq2SeqLuong(*a, luong_attn_cls()), train.luong(), "luong"),
              ("baseline", Seq2SeqBaseline, cfg, None))
    for label, make, run_cfg, warm in models:
        torch.manual_seed(run_cfg.seed)  # as the graded cases seed the student's model
        model = make(len(toy.SRC_ITOS), len(toy.TGT_ITOS), run_cfg.embed_dim, run_cfg.hidden_dim)
        kept: dict[str, bytes] = {}

        def keep(step: int, model=model, kept=kept) -> None:
            kept["state"] = _state_bytes(model.state_dict())

        result = train.train(model, run_cfg, checkpoint=keep, checkpoint_at=(train.WARM_STEP[warm],) if warm else ())
        if warm and "state" not in kept:
            raise RuntimeError(f"{label}'s run stopped after {result.steps} steps, before the warm start's "
                               f"{train.WARM_STEP[warm]}: lower train.WARM_STEP")
        acc = accuracy_by_length(model, test)
        curves[label] = {str(n): round(a, 4) for n, a in sorted(acc.items())}
        if warm:
            out.update(_record(WARM[warm], kept["state"]))
        if progress:
            progress(f"{label}: {result.steps} steps in {result.seconds:.0f} s, accuracy at 30 words {acc[30]:.3f}")
    return {**out, **_record(name, (json.dumps(curves, indent=1) + "\n").encode())}


def load_eval_model(model_cls) -> nn.Module:
    """The half-trained evaluation model, checked against its recorded checksum."""
    name, cfg = EVAL_MODEL
    data = _verified(name)
    model = model_cls(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    model.load_state_dict(torch.load(io.BytesIO(data), weights_only=True))
    return model.eval()


def load_warm_start(kind: str = "bahdanau") -> dict[str, torch.Tensor]:
    """Where a graded training case starts ("bahdanau": the reference, "luong": Luong's model, each train.WARM_STEP
    steps into its run from scratch), checked against the recorded checksum."""
    return torch.load(io.BytesIO(_verified(WARM[kind])), weights_only=True)


def load_curves() -> dict[str, dict[int, float]]:
    """The reference's, Luong's and the baseline's test accuracy by source length, checked against the checksum."""
    data = _verified(CURVES[0])
    return {label: {int(n): float(a) for n, a in curve.items()} for label, curve in json.loads(data).items()}
