"""The worker's request loop: load the submission's file, build its modules, call them, send data back.

Every command names student code and plain inputs; what comes back is `wire.encode`d data or an
error record the judge turns into a hint. Nothing here knows a case, an expected value or a score.
"""
from __future__ import annotations

import contextlib
import linecache
import random
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from grader.worker import chain, seeding, standin_cuda, wire

SUB_PKG = "attnlab_submission"
PAIRS: list | None = None  # the training split, read by the server before any worker is jailed
_BMM, _UNSQUEEZE, _SQUEEZE = torch.bmm, torch.unsqueeze, torch.squeeze  # taken before any student code loads
_PRINT_OPTIONS, _SET_PRINT_OPTIONS = torch._tensor_str.PRINT_OPTS, torch.set_printoptions


class _Calls(torch.overrides.TorchFunctionMode):
    """Counts the torch functions and tensor methods a call makes (those inside them not again): one batched product
    makes as many at every size, a loop over sentences or positions more at each larger one."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _brief_printing() -> Iterator[None]:
    """Tensors printed as their first and last items along each dimension: a debug print of a tensor then costs a
    call the same at every size, as a batched product's time does not grow with a loop's (the no-loop case's count of
    torch calls, and its chain, which forgives a call's cost measured at a small size). Code that sets other options
    inside the call slows only itself."""
    kept = {k: getattr(_PRINT_OPTIONS, k) for k in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}
    _SET_PRINT_OPTIONS(threshold=0, edgeitems=1)
    try:
        yield
    finally:
        _SET_PRINT_OPTIONS(**kept)


def _bmm_context(alpha: torch.Tensor, enc: torch.Tensor) -> torch.Tensor:
    """The batched product with the functions taken before any student code loaded."""
    return _SQUEEZE(_BMM(_UNSQUEEZE(alpha, 1), enc), 1)


def read_pairs(text: str) -> list[tuple[list[str], list[str]]]:
    """The training split's (source words, target words) pairs: data read before the jail, no lab code needed."""
    return [(s.split(), t.split()) for s, t in (line.split("\t") for line in text.splitlines() if line.strip())]


def lab_package() -> types.ModuleType:
    """An empty `grader.lab` package, made here rather than imported: the lab modules a piece needs are loaded into
    it from the source the judge sends (Worker.load), and nothing under it is found on disk (no __path__ entry),
    so a worker imports no module of the lab's own. The server makes it before any worker forks."""
    pkg = types.ModuleType("grader.lab")
    pkg.__path__, pkg.__package__ = [], "grader.lab"
    sys.modules["grader.lab"] = pkg
    setattr(sys.modules["grader"], "lab", pkg)
    return pkg


COMMANDS: dict[str, Callable[[Worker, dict], object]] = {}


def command(name: str) -> Callable:
    """Register a Worker method as its answer to {"cmd": name}: a command is one method, added in one place."""
    def register(method: Callable) -> Callable:
        COMMANDS[name] = method
        return method
    return register


class Worker:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.store: dict[str, object] = {}
        self.module: types.ModuleType | None = None
        self.filename = ""
        self.filenames: set[str] = set()  # the student's own files among the loaded modules
        self.trainers: dict[str, Any] = {}
        # the names of the lab modules the judge gave this worker, by stem, as they were before the student's code ran
        self.lab: dict[str, dict[str, object]] = {}

    # -- loading --

    def load(self, modules: list, student: str, filename: str, seed: int, threads: int = 1, lab: list = (),
             own: list = ()) -> None:
        """Compile the lab modules, then the submission's: `student` is the piece's file (named `filename`);
        `own` lists other modules that are also the student's files (the plots load a whole submission)."""
        seeding.manual_seed(seed)
        random.seed(seed)
        torch.set_num_threads(threads)
        for i, (stem, source) in enumerate(lab):  # the lab modules its piece needs, into lab_package(): grader.lab.*
            lab[i] = (stem, None)
            mod = types.ModuleType(f"grader.lab.{stem}")
            mod.__file__, mod.__package__ = f"<lab {stem}.py>", "grader.lab"
            sys.modules[mod.__name__] = mod
            exec(compile(source, mod.__file__, "exec"), mod.__dict__)  # noqa: S102 - the judge's own lab code
            setattr(sys.modules["grader.lab"], stem, mod)
            self.lab[stem] = dict(vars(mod))  # a copy: the module is the student's to change once their code runs
            del source
        pkg = types.ModuleType(SUB_PKG)
        pkg.__path__ = []
        pkg.__package__ = SUB_PKG
        sys.modules[SUB_PKG] = pkg
        for i, (stem, source) in enumerate(modules):
            modules[i] = (stem, None)  # the text goes as soon as it is compiled: the student's code never sees it
            name = f"{SUB_PKG}.{stem}"
            path = filename if stem == student else f"{stem}.py" if stem in own else f"<lab {stem}.py>"
            mod = types.ModuleType(name)
            mod.__file__, mod.__package__ = path, SUB_PKG
            sys.modules[name] = mod
            if stem == student or stem in own:  # tracebacks and inspect see the student's own lines
                self.filenames.add(path)
                linecache.cache[path] = (len(source), None, source.splitlines(True), path)
            code = compile(source, path, "exec")
            del source
            exec(code, mod.__dict__)  # noqa: S102 - this process exists to run it
            setattr(pkg, stem, mod)
            if stem == student:
                self.module, self.filename = mod, path

    # -- resolving names --

    def resolve(self, name: str) -> Any:
        if name == "@model":
            return RemoteModel(self.fd)
        if name.startswith("@"):
            return getattr(self.module, name[1:])
        base, _, index = name.partition("#")
        head, *attrs = base.split(".")
        obj = self.store[head]
        for attr in attrs:
            obj = getattr(obj, attr)
        for i in index.split("#") if index else []:
            obj = obj[int(i)]
        return obj

    def args(self, req: dict) -> tuple[list, dict]:
        args: Any = wire.decode(req.get("args", {"__kind__": "list", "items": []}), self.resolve)
        kwargs: Any = wire.decode(req.get("kwargs", {"__kind__": "dict", "items": []}), self.resolve)
        device = req.get("device")
        if device:
            args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
        return args, kwargs

    def target(self, req: dict):
        obj = self.resolve(req["target"])
        if req.get("device"):
            obj = obj.to(req["device"])
        return getattr(obj, req["method"]) if req.get("method") else obj

    # -- commands --

    def handle(self, req: dict) -> object:
        """Answer one request: the method COMMANDS holds for its "cmd"."""
        run = COMMANDS.get(req["cmd"])
        if run is None:
            raise ValueError(f"unknown command {req['cmd']!r}")
        return run(self, req)

    @command("load")
    def cmd_load(self, req: dict) -> None:
        self.load(req["modules"], req["student"], req["filename"], req["seed"], req.get("threads", 1),
                  req.get("lab", []), req.get("own", []))

    @command("seed")
    def cmd_seed(self, req: dict) -> None:
        seeding.manual_seed(req["seed"])

    @command("reset")
    def cmd_reset(self, req: dict) -> None:
        """A new case: drop what the last one built, seed as a fresh process would be."""
        self.store.clear()
        self.trainers.clear()
        seeding.manual_seed(req["seed"])
        random.seed(req["seed"])
        torch.set_num_threads(1)

    @command("new")
    def cmd_new(self, req: dict) -> None:
        """A lab model (trusted code, given by the judge) around the student's module, or the student's class."""
        if req["cls"].startswith("@lab:"):
            stem, name = req["cls"][5:].split(".")  # "@lab:luong_model.Seq2SeqLuong"
            cls = self.lab_name(stem, name)  # only a lab module this piece's worker was given
        else:
            cls = getattr(self.module, req["cls"])
        args, kwargs = self.args(req)
        self.store[req["name"]] = cls(*args, **kwargs)

    @command("load_state")
    def cmd_load_state(self, req: dict) -> list | None:
        state = wire.decode(req["state"])
        if req.get("strict", True):
            self.resolve(req["name"]).load_state_dict(state)
            return None
        return list(self.resolve(req["name"]).load_state_dict(state, strict=False).unexpected_keys)

    @command("state")
    def cmd_state(self, req: dict) -> dict:
        """A trained model's parameters, for the judge to decode with its own copy."""
        return {k: v.detach().clone() for k, v in self.resolve(req["name"]).state_dict().items()}

    @command("to")
    def cmd_to(self, req: dict) -> None:
        self.store[req["name"]] = self.resolve(req["name"]).to(req["device"])

    @command("call")
    def cmd_call(self, req: dict) -> object:
        fn = self.target(req)
        args, kwargs = self.args(req)
        with torch.set_grad_enabled(req.get("grad", True)):
            out = fn(*args, **kwargs)
        if req.get("keep"):
            self.store[req["keep"]] = out
        return out

    @command("probe")
    def cmd_probe(self, req: dict) -> dict:
        """The call on a stand-in CUDA device (grader.worker.standin_cuda): its values, and where each was."""
        obj = self.resolve(req["target"])
        if isinstance(obj, torch.nn.Module):
            standin_cuda.to_device(obj)  # its parameters and buffers, in place: the case built it for this call
        fn = getattr(obj, req["method"]) if req.get("method") else obj
        args, kwargs = self.args(req)
        values, devices = standin_cuda.call(fn, args, kwargs, req.get("grad", True))
        return {"values": values, "devices": devices}

    @command("calls")
    def cmd_calls(self, req: dict) -> int:
        """How many torch calls one call makes: a count the student's code could forge, so it only ever fails a
        case (grader/cases/test_context.py)."""
        fn = self.target(req)
        args, kwargs = self.args(req)
        with _Calls() as calls, _brief_printing():
            fn(*args, **kwargs)
        return calls.n

    @command("bmm")
    def cmd_bmm(self, req: dict) -> torch.Tensor:
        """Trusted: the batched product on a call's inputs, which the judge times beside the student's."""
        (alpha, enc), _ = self.args(req)
        with torch.set_grad_enabled(True):
            return _bmm_context(alpha, enc)

    @command("chain")
    def cmd_chain(self, req: dict) -> list:
        """Trusted: `steps` calls chained by grader.worker.chain, of the student's function or (target "bmm") of the
        batched product, which the judge times beside it; every answer goes back to be checked."""
        fn = _bmm_context if req["target"] == "bmm" else self.target(req)
        (alpha, enc), _ = self.args(req)
        with torch.set_grad_enabled(True), _brief_printing():
            return chain.run(fn, alpha, enc, int(req["steps"]), int(req["seed"]))

    @command("backward")
    def cmd_backward(self, req: dict) -> None:
        value = self.resolve(req["name"])
        if req.get("rows"):  # logits, each row up to a constant: the loss sees only their log-softmax
            value = torch.log_softmax(value, dim=-1)
        value.square().sum().backward()

    @command("input_grads")
    def cmd_input_grads(self, req: dict) -> list:
        """d(sum of squares of the first output)/d(the inputs named by index)."""
        fn = self.target(req)
        args, kwargs = self.args(req)
        for i in req["wrt"]:
            args[i] = args[i].detach().requires_grad_(True)
        out = fn(*args, **kwargs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        first.square().sum().backward()
        return [args[i].grad for i in req["wrt"]]

    @command("grads")
    def cmd_grads(self, req: dict) -> dict:
        prefix = req.get("prefix", "")
        return {n: p.grad for n, p in self.resolve(req["name"]).named_parameters() if n.startswith(prefix)}

    @command("train")
    def cmd_train(self, req: dict) -> int:
        name = req["name"]
        if name not in self.trainers:
            self.trainers[name] = self.lab_name("train", "Trainer")(self.resolve(name), req["cfg"], pairs=PAIRS)
        return self.trainers[name].run(req["steps"])

    def lab_name(self, stem: str, name: str) -> Any:
        """`name` of the lab module `stem` as the judge sent it to load, before the student's code ran: a worker
        imports no module of the lab's own from disk, and holds only those its piece was given."""
        if stem not in self.lab:
            raise KeyError(f"grader/lab/{stem}.py is not one of this worker's lab modules")
        return self.lab[stem][name]

    def serve(self) -> None:
        while True:
            try:
                req = wire.recv(self.fd, trusted=True)
            except wire.Closed:
                return
            try:
                value = self.handle(req)
                reply = {"ok": True, "value": wire.encode(value)}
            except BaseException as e:  # noqa: BLE001 - every failure of student code is reported, not raised
                reply = {"ok": False, "error": self.describe(e)}
            try:
                wire.send(self.fd, reply)
            except Exception:  # noqa: BLE001 - e.g. an unpicklable value smuggled past encode
                wire.send(self.fd, {"ok": False, "error": {"kind": "error", "type": "WireError",
                                                           "message": "the result could not be sent", "where": ""}})

    def describe(self, e: BaseException) -> dict:
        kind = "error"
        if isinstance(e, NotImplementedError):
            kind = "not_implemented"
        elif isinstance(e, SystemExit):
            kind = "exit"
        elif isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and "allocate" in str(e)):
            kind = "memory"
        elif isinstance(e, RecursionError):
            kind = "recursion"
        text = str(e.code if isinstance(e, SystemExit) else e).strip().splitlines()
        where = self.where(e)
        if isinstance(e, SyntaxError):
            text, where = [str(e.msg)], f" at line {e.lineno}"
        return {"kind": kind, "type": type(e).__name__[:100], "message": (text[0] if text else "")[:300],
                "where": where}

    def where(self, e: BaseException) -> str:
        tb, out = e.__traceback__, ""
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name in self.filenames:
                out = f" (in {name.rsplit('/', 1)[-1]}, line {tb.tb_lineno}, in {tb.tb_frame.f_code.co_name})"
            tb = tb.tb_next
        return out


class RemoteModel:
    """A Seq2SeqAttn whose weights and code stay in the judge: every call is a question over the socket."""

    training = False

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.encoder = _Remote(fd, "encoder")
        self.decoder = types.SimpleNamespace(forward_step=_Remote(fd, "forward_step"))
        self._param = torch.nn.Parameter(torch.zeros(1), requires_grad=False)

    def __call__(self, *args, **kwargs):
        return _Remote(self._fd, "forward")(*args, **kwargs)

    forward = __call__

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def to(self, *args, **kwargs):
        return self

    def parameters(self):
        yield self._param


class _Remote:
    def __init__(self, fd: int, name: str) -> None:
        self.fd, self.name = fd, name

    def __call__(self, *args, **kwargs):
        wire.send(self.fd, {"callback": self.name, "args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)})
        reply = wire.recv(self.fd, trusted=True)
        if not reply.get("ok"):
            raise RuntimeError(str(reply.get("error", "the model refused the call"))[:300])
        return wire.decode(reply["value"])


def main(fd: int) -> None:
    Worker(fd).serve()
