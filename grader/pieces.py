"""The six pieces of the lab: their names, files and what a student writes in each."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    name: str
    module: str  # file stem under exercises/ and reference/
    summary: str


PIECES: dict[str, Piece] = {
    p.name: p
    for p in (
        Piece("encoder", "encoder", "EncoderAll.forward: every LSTM output and the final (h, c)"),
        Piece("additive", "additive", "BahdanauAttention.forward: masked additive scores and alpha"),
        Piece("context", "context", "attention_context: the alpha-weighted sum as one bmm"),
        Piece("luong", "luong", "LuongDotAttention.forward: scaled dot-product attention"),
        Piece("decoder", "decoder", "AttnDecoder.forward_step and Seq2SeqAttn.forward"),
        Piece("evaluation", "evaluation", "greedy_decode and accuracy_by_length"),
    )
}
MODULES = [p.module for p in PIECES.values()]
