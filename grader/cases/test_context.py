"""Hidden cases for the `context` piece: attention_context."""
from __future__ import annotations

import ast

import pytest
import torch

from grader.judge import verdicts
from . import util

pytestmark = pytest.mark.piece("context")
WEIGHTED_SUM = "it is the alpha weighted sum of encoder states"  # the case whose check names the usual causes


def inputs(B: int, T: int, H: int, device: str = "cpu"):
    alpha = torch.softmax(torch.randn(B, T), dim=-1).to(device)  # (B, T)
    return alpha, torch.randn(B, T, H).to(device)


def loop_in(source: str, name: str) -> int | None:
    """The line of the first loop or comprehension that runs over function `name`'s inputs (its arguments, or
    values computed from them), there or in a function of the same file it hands them to, however deep."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if name not in functions:
        return None
    todo, seen = [(name, frozenset(_params(functions[name])))], set()
    while todo:
        fn_name, inputs = todo.pop()
        if (fn_name, inputs) in seen:
            continue
        seen.add((fn_name, inputs))
        line, calls = _loops_over(functions[fn_name], set(inputs), functions)
        if line is not None:
            return line
        todo += calls
    return None


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]


def _loops_over(fn, tainted: set[str], functions: dict) -> tuple[int | None, list]:
    """The first loop over `tainted` names in `fn`, and the (helper, tainted parameters) it passes them to."""

    def uses(node: ast.AST | None) -> bool:
        return node is not None and any(isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node))

    for _ in range(3):  # names computed from the inputs (n = alpha.size(1)) are inputs too
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and uses(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    calls = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.AsyncFor)) and uses(node.iter):
            return node.lineno, []
        if isinstance(node, ast.While) and uses(node.test):
            return node.lineno, []
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) and any(
                uses(g.iter) for g in node.generators):
            return node.lineno, []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            params = _params(functions[node.func.id])
            passed = {params[i] for i, a in enumerate(node.args) if i < len(params) and uses(a)}
            passed |= {k.arg for k in node.keywords if k.arg in params and uses(k.value)}
            if passed:
                calls.append((node.func.id, frozenset(passed)))
    return None, calls


def context_of(sub, alpha, enc):
    return verdicts.call(sub.fn("attention_context"), alpha, enc, what="attention_context")


@pytest.mark.points(4)  # with the device case's point: values on meta cannot be checked
def test_it_is_the_alpha_weighted_sum_of_encoder_states(sub, ref):
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
    want = (alpha[..., None] * enc).sum(1)  # (B, H): sum_i alpha_i h_i
    verdicts.close(got, want, "context", "Weight each encoder state h_i by alpha_i and sum over the source positions "
                 "(alpha as (B, 1, T_src) times encoder_outputs (B, T_src, H)).")


@pytest.mark.points(1)
def test_a_one_hot_alpha_picks_one_state(sub, ref):
    s = util.MAIN
    enc = torch.randn(s.B, s.T, s.H)
    pick = torch.randint(0, s.T, (s.B,))
    alpha = torch.nn.functional.one_hot(pick, s.T).float()
    got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
    verdicts.close(got, enc[torch.arange(s.B), pick], "context for a one-hot alpha",
                 "With all weight on position i, the context must be exactly h_i of that sentence.")


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_it_handles_edge_sizes(sub, ref, s):
    alpha, enc = inputs(s.B, s.T, s.H)
    got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
    want = ref.context.attention_context(alpha, enc)
    if not verdicts.is_close(got, want) and not util.right_elsewhere(lambda: right_at_the_usual_sizes(sub)):
        verdicts.fail("the context differs from the reference at the usual sizes too, not only at this one. "
                    + util.see(WEIGHTED_SUM))
    util.close(got, want, "context", "The values are right at the usual sizes but not when a dimension has size 1: "
               "squeeze only the dimension you added (squeeze(1)), not every size-1 dimension.")


def right_at_the_usual_sizes(sub) -> None:
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    util.close(verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H)), (alpha[..., None] * enc).sum(1), "context", "")


@pytest.mark.points(2)
def test_it_runs_no_python_loop_over_positions(sub, ref):
    s = util.MAIN
    short, long = inputs(s.B, 4, s.H), inputs(s.B, 32, s.H)
    for alpha, enc in (short, long):  # the property is paid only when the values are right
        got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
        util.close(got, (alpha[..., None] * enc).sum(1), "context", util.see(WEIGHTED_SUM))
    n_short = verdicts.call(sub.ops, sub.fn("attention_context"), *short, what="attention_context")
    n_long = verdicts.call(sub.ops, sub.fn("attention_context"), *long, what="attention_context")
    if type(n_short) is not int or type(n_long) is not int:
        verdicts.fail("the grader could not count attention_context's tensor operations.")
    loop = loop_in(sub.source, "attention_context")  # read here, in the judge: a worker's count can be forged
    if loop:
        verdicts.fail(f"attention_context has a Python loop (line {loop}): replace it with one batched product (torch.bmm).")
    if n_long > n_short:
        verdicts.fail(f"attention_context runs more tensor operations for longer sentences ({n_short} at T_src=4, "
                    f"{n_long} at T_src=32): replace the Python loop over positions with one batched product (torch.bmm).")


@pytest.mark.points(0)  # a hint: see util.on_meta
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    util.close(context_of(sub, alpha, enc), ref.context.attention_context(alpha, enc), "context on the CPU",
               "Device-agnostic code must first be right on the CPU. " + util.see(WEIGHTED_SUM))
    got = util.on_meta(context_of, sub, alpha.to("meta"), enc.to("meta"), what="attention_context",
                       hint="make new tensors on the inputs' device")
    with verdicts.meta_answers():
        verdicts.tensor(got, "context", (s.B, s.H))
    verdicts.on_device("meta", "make new tensors on the inputs' device", context=got)


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    dev = util.cuda_or_skip()
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    got = context_of(sub, alpha.to(dev), enc.to(dev))
    verdicts.close(got.cpu(), ref.context.attention_context(alpha, enc), "context on CUDA", "CUDA and CPU disagree.", atol=1e-4, rtol=1e-3)
