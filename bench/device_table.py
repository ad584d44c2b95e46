"""The device rules of the stand-in CUDA device (grader/worker/standin_cuda.py) as a table: each row a small snippet
that is legal or illegal on real CUDA. tests/worker/test_standin_cuda.py runs every row on the stand-in and asserts
its verdict; on a machine with a GPU this script runs the same rows on real CUDA too:

    python bench/device_table.py    # each row's verdict on the stand-in and on CUDA, and where they disagree

Without CUDA it says "no CUDA device: stand-in only" and prints the stand-in's verdicts. Exit status 1 where a row's
verdict on the stand-in is not the table's, or (with CUDA) the stand-in and CUDA disagree.

A snippet is an expression over the inputs `x` (B, T, H) floats, `mask` (B, T) booleans, True at the real tokens,
and `ids` (B, T) token ids, all on the device; `B`, `T`, `H`, `torch`, `F`, `pack` (pack_padded_sequence), `META`
(a (1, H) meta tensor made beforehand) and `set_item(t, index, value)` (`t[index] = value`, then t) are in scope.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.worker import standin_cuda  # noqa: E402  (after the path above)

B, T, H, V = 3, 7, 6, 11


class Row(NamedTuple):
    name: str
    code: str
    legal: bool  # on real CUDA


ROWS = [
    # legal: scalars join, tensors made on (or moved to) the inputs' device, CPU indices, CPU lengths
    Row("python scalars in elementwise ops", "x * 2.0 + 1 - x / 3", True),
    Row("0-dim CPU tensors in elementwise ops",
        "x * torch.tensor(2.0) + torch.tensor(1.0) - torch.tensor(H).sqrt()", True),
    Row("0-dim CPU tensor in masked_fill", "x.masked_fill(~mask[..., None], torch.tensor(float('-inf')))", True),
    Row("python scalar in masked_fill", "x.masked_fill(~mask[..., None], -1e9)", True),
    Row("0-dim CPU tensor in where", "torch.where(mask[..., None], x, torch.tensor(0.0))", True),
    Row("python scalar in where", "torch.where(mask[..., None], x, 0.0)", True),
    Row("new_full", "x.new_full((B, T), -1e9).masked_fill(mask, 0.0)", True),
    Row("full_like", "torch.full_like(x, -1e9).masked_fill(mask[..., None], 1.0)", True),
    Row("torch.finfo().min", "x.masked_fill(~mask[..., None], torch.finfo(x.dtype).min)", True),
    Row("device= from the input",
        "x + torch.zeros(B, T, H, device=x.device) + torch.arange(H, device=x.device)", True),
    Row(".to(other)", "x + torch.ones(H).to(x) + torch.ones(H).to(x.device)", True),
    Row("type_as", "x + torch.ones(H).type_as(x)", True),
    Row("CPU indices into a device tensor", "x[torch.tensor([0, 2])] + x[:, torch.arange(2)].sum()", True),
    Row("CPU boolean mask into a device tensor", "x[torch.tensor([True, False, True])]", True),
    Row("index_put with CPU indices and a 0-dim value",
        "set_item(x.clone(), torch.tensor([0, 2]), torch.tensor(0.0))", True),
    Row("CPU lengths for packing",
        "pack(x, mask.sum(1).cpu(), batch_first=True, enforce_sorted=False).data", True),
    Row("python lengths for packing",
        "pack(x, mask.sum(1).tolist(), batch_first=True, enforce_sorted=False).data", True),
    Row("3-D linear with a 0-dim CPU bias (torch adds it elementwise)", "F.linear(x, x[0, :H], torch.tensor(0.5))", True),
    # illegal: a tensor made without device= meets the inputs, device lengths, device indices into a CPU tensor, a
    # 0-dim CPU tensor outside elementwise operations, a list by keyword, a third device
    Row("torch.zeros(B, T) without a device", "x.sum(-1) + torch.zeros(B, T)", False),
    Row("torch.arange(T) without a device", "torch.arange(T)[None, :] < mask.sum(1, keepdim=True)", False),
    Row("a 1-D CPU tensor in an elementwise op", "x * torch.tensor([2.0] * H)", False),
    Row("lengths on the device for packing",
        "pack(x, mask.sum(1), batch_first=True, enforce_sorted=False).data", False),
    Row("a CPU tensor indexed by a device mask", "torch.zeros(B, T)[mask]", False),
    Row("a CPU tensor indexed by device indices", "torch.zeros(T, T)[mask.sum(1) - 1]", False),
    Row("index_put into a CPU tensor with a device mask", "set_item(torch.zeros(B, T), mask, 1.0)", False),
    Row("index_put_ into a CPU tensor with a device mask",
        "torch.zeros(B, T).index_put_((mask,), torch.tensor(1.0))", False),
    Row("index_select with a 0-dim CPU index", "x.index_select(1, torch.tensor(0))", False),
    Row("embedding with a 0-dim CPU index", "F.embedding(torch.tensor(1), x[0])", False),
    Row("gather with a 0-dim CPU index", "x.flatten().gather(0, torch.tensor(0))", False),
    Row("stack with a 0-dim CPU tensor", "torch.stack([x[0, 0, 0], torch.tensor(0.0)])", False),
    Row("bmm with a CPU tensor", "torch.bmm(x, torch.ones(B, H, 1))", False),
    Row("cat with a CPU tensor", "torch.cat([x, torch.zeros(B, T, 1)], dim=-1)", False),
    Row("2-D linear (addmm) with a 0-dim CPU bias", "F.linear(x[0], x[0, :H], torch.tensor(0.5))", False),
    Row("a list of CPU tensors passed by keyword (out=)",
        "torch.split_with_sizes_copy(x, [2, 1], out=[torch.empty(2, T, H), torch.empty(1, T, H)])", False),
    Row("a third device (meta) beside the device", "x[0] + META", False),
]


def inputs() -> dict[str, torch.Tensor]:
    """The rows' inputs, on the CPU: every batch has pads."""
    g = torch.Generator().manual_seed(0)
    mask = torch.arange(T)[None, :] < torch.tensor([T, 5, 3])[:, None]
    return {"x": torch.randn(B, T, H, generator=g), "mask": mask,
            "ids": torch.randint(1, V, (B, T), generator=g).masked_fill(~mask, 0)}


def set_item(t: torch.Tensor, index, value) -> torch.Tensor:
    t[index] = value
    return t


META = torch.empty(1, H, device="meta")


def function(row: Row):
    """The row's snippet as a function of the inputs."""
    scope = {"torch": torch, "F": F, "pack": pack_padded_sequence, "B": B, "T": T, "H": H, "META": META,
             "set_item": set_item}
    exec(f"def snippet(x, mask, ids):\n    return {row.code}\n", scope)  # noqa: S102  (the table's own code)
    return scope["snippet"]


def on_cpu(row: Row):
    """The snippet's value with every input on the CPU."""
    return function(row)(**inputs())


def on_standin(row: Row) -> tuple[bool, object, object]:
    """(legal there, the values, where each was): the values and places are the error's message where illegal."""
    try:
        values, devices = standin_cuda.call(function(row), [], inputs())
    except Exception as e:  # noqa: BLE001  (any refusal is the verdict)
        return False, f"{type(e).__name__}: {e}", None
    return True, values, devices


def on_cuda(row: Row) -> tuple[bool, str]:
    """(legal on real CUDA, what it raised)."""
    try:
        function(row)(**{k: v.cuda() for k, v in inputs().items()})
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"
    return True, ""


def verdict(legal: bool) -> str:
    return "legal" if legal else "illegal"


def main() -> int:
    cuda = torch.cuda.is_available()
    if not cuda:
        print("no CUDA device: stand-in only")
    bad = 0
    for row in ROWS:
        there, said, _ = on_standin(row)
        line = f"{row.name:<62} table {verdict(row.legal):<8} stand-in {verdict(there):<8}"
        wrong = there != row.legal
        if cuda:
            real, raised = on_cuda(row)
            line += f" cuda {verdict(real):<8}"
            if real != there:
                line += "  DISAGREE" + (f" (cuda: {raised[:120]})" if raised else f" (stand-in: {str(said)[:120]})")
            wrong = wrong or real != there
        elif wrong:
            line += "  NOT THE TABLE'S"
        bad += wrong
        print(line)
    print(f"{len(ROWS)} rows, {bad} where the stand-in " + ("and CUDA disagree or the table is wrong" if cuda else
                                                           "is not the table's"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
