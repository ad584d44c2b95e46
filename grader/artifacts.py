"""Small trained models the cases and plots need, with checksums and the command that rebuilds them.

`grade artifacts` retrains them from fixed seeds; the cases refuse a file whose checksum is off.
"""
from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import torch
import torch.nn as nn

from . import ROOT, toy, train

DIR = ROOT / "grader" / "artifacts"
SUMS = DIR / "SHA256SUMS.json"
# a half-trained reference model: mid-range accuracy, where evaluation mistakes change the numbers
EVAL_MODEL = ("eval_model.pt", train.TrainConfig(embed_dim=16, hidden_dim=32, batch_size=64, lr=0.01, max_steps=300,
                                                 short_steps=300, short_len=20, eval_every=10**9, target_acc=2.0, seed=11,
                                                 threads=1))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(ref_decoder_module) -> dict[str, str]:
    """Retrain every artifact with the reference model class and record its checksum."""
    name, cfg = EVAL_MODEL
    torch.manual_seed(cfg.seed)
    model = ref_decoder_module.Seq2SeqAttn(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    train.train(model, cfg)
    buf = io.BytesIO()
    torch.save({k: v.contiguous() for k, v in model.state_dict().items()}, buf)
    DIR.mkdir(exist_ok=True)
    (DIR / name).write_bytes(buf.getvalue())
    sums = {name: _sha(buf.getvalue())}
    SUMS.write_text(json.dumps(sums, indent=1) + "\n")
    return sums


def load_eval_model(model_cls) -> nn.Module:
    """The half-trained evaluation model, checked against its recorded checksum."""
    name, cfg = EVAL_MODEL
    data = (DIR / name).read_bytes()
    want = json.loads(SUMS.read_text())[name]
    if _sha(data) != want:
        raise RuntimeError(f"grader/artifacts/{name} does not match its checksum; rebuild it with `grade artifacts`")
    model = model_cls(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    model.load_state_dict(torch.load(io.BytesIO(data), weights_only=True))
    return model.eval()
