"""The six pieces of the lab: their names, files and what a student writes in each.

Also what a student release needs about each piece and cannot take from reference/ (which it does not
have): the relative imports its module makes (a notebook cell is given them back as a module), and the
digest of its generated stub (a `.py` still equal to it is untouched, so the notebook's cell is graded).
Tests check both against reference/ and exercises/.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    name: str
    module: str  # file stem under exercises/ and reference/
    summary: str
    imports: tuple[str, ...] = ()  # the module's `from .x import y` lines, in the reference's order
    stub_digest: str = ""  # notebook.digest() of the generated exercises/<module>.py
    # the lab's own modules (grader/<name>.py) the piece's worker needs, in dependency order; no other worker gets them
    lab: tuple[str, ...] = ()


PIECES: dict[str, Piece] = {
    p.name: p
    for p in (
        Piece("encoder", "encoder", "EncoderAll.forward: every LSTM output and the final (h, c)",
              stub_digest="85de09f77956e086"),
        Piece("additive", "additive", "BahdanauAttention.forward: masked additive scores and alpha",
              imports=("from .context import attention_context",), stub_digest="1e76ab37b0d735f0"),
        Piece("context", "context", "attention_context: the alpha-weighted sum as one bmm",
              stub_digest="ccdbcb13f4256494"),
        Piece("luong", "luong", "LuongDotAttention.forward: scaled dot-product attention",
              imports=("from .context import attention_context",), stub_digest="38be13308c44a335",
              lab=("toy", "train", "baseline", "luong_model")),  # its training case: Luong's decoder around it
        Piece("decoder", "decoder", "AttnDecoder.forward_step and Seq2SeqAttn.forward",
              imports=("from .additive import BahdanauAttention", "from .encoder import EncoderAll"),
              stub_digest="678e6ee0b68d7aaa", lab=("toy", "train")),  # its training case
        Piece("evaluation", "evaluation", "greedy_decode and accuracy_by_length",
              imports=("from .decoder import Seq2SeqAttn",), stub_digest="19e18746f6a300d3"),
    )
}
MODULES = [p.module for p in PIECES.values()]


def run_order(names: list[str]) -> list[str]:
    """`names` with each piece after the pieces whose modules it imports, otherwise in the registry's order.

    A piece's worker holds the reference of what its module imports (the decoder's: the encoder and the
    attentions), and state the machine keeps (the page cache) outlives a worker; so a piece's unit cases run
    before any worker that holds its answer exists.
    """
    by_module = {p.module: p.name for p in PIECES.values()}
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for line in PIECES[name].imports:  # "from .context import attention_context"
            visit(by_module[line.split()[1].lstrip(".")])
        order.append(name)

    for name in PIECES:
        visit(name)
    return [n for n in order if n in names]
