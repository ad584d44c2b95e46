"""What a judge may repeat of a worker that holds reference code (grader.judge.sources.withheld says which do).

Such a worker's prints, warnings, exception messages, class and function names, reprs, exit codes and signals
could carry the reference's code to the student, 150 characters at a time. So where `active()`, the judge
repeats only what cannot carry it: its own verdicts and hints, a built-in exception's type (a class of the
student's own is reported as one, unnamed), the student's own file and a line in it, and the stubs' own
"not implemented" messages. The parent drops the piece's printed output (grader.runner.launch) and the reports
say why in one line. Elsewhere (encoder, context, evaluation, public checks) everything is shown as before.
"""
from __future__ import annotations

import builtins
import re

BUILTIN_ERRORS = frozenset(name for name, value in vars(builtins).items()
                           if isinstance(value, type) and issubclass(value, BaseException))
OWN_CLASS = "an exception of a class of its own"
NOTE = "its message is withheld"

_state: dict = {"on": False, "filename": "", "lines": 0, "stubs": frozenset(), "dropped": 0}


def configure(on: bool, filename: str = "", source: str = "", stubs: frozenset[str] | set[str] = frozenset()) -> None:
    """Turn withholding on for this judge's piece: its file's name and text (a line number must be in it) and the
    "not implemented" messages of its stub."""
    _state.update(on=on, filename=filename, lines=len(source.splitlines()), stubs=frozenset(stubs), dropped=0)


def active() -> bool:
    return _state["on"]


def hide(full: str, shown: str) -> str:
    """`full` (text with something of the worker's in it), or, withheld, `shown` (the judge's own words)."""
    if not active():
        return full
    _state["dropped"] += 1
    return shown


def take_dropped() -> bool:
    """Whether anything was withheld since the last call (or `configure`), and start counting afresh: each case's
    record says so of its own message, and the report says why."""
    found, _state["dropped"] = _state["dropped"] > 0, 0
    return found


def stub_messages(reference_text: str, piece: str) -> frozenset[str]:
    """The messages of the NotImplementedErrors `grade stubs` writes into this piece's stub."""
    from grader.judge.stub_source import stub_source

    return frozenset(re.findall(r'raise NotImplementedError\("([^"\n]*)"\)', stub_source(reference_text, piece)))


def error_type(name: str) -> str:
    """An exception's type as a report may name it: a built-in one by name, any other as a class of its own."""
    return name if not active() or name in BUILTIN_ERRORS else hide(name, OWN_CLASS)


_WHERE = re.compile(r" \(in ([^,()]+), line (\d+), in [^\n]*\)")


def where(text: str) -> str:
    """The worker's " (in FILE, line N, in NAME)": withheld, only the student's own file and a line it has."""
    if not active():
        return text
    found = _WHERE.fullmatch(text or "")
    if not found or found.group(1) != _state["filename"] or not 1 <= int(found.group(2)) <= _state["lines"]:
        return hide(text, "") if text else ""
    return hide(text, f" (in {found.group(1)}, line {int(found.group(2))})")


def not_implemented(message: str) -> str | None:
    """A NotImplementedError's message as a report may show it: withheld, only the stub's own."""
    return message if not active() or message in _state["stubs"] else hide(message, None)


def value_type(x: object) -> str:
    """The type of something a worker answered, as a hint names it: an object that could not travel as data
    comes back as its class's name (wire.Opaque), which is text of the worker's choosing."""
    name = getattr(x, "type_name", None)
    if name is None:
        return type(x).__name__  # data the wire rebuilt: None, bool, int, float, str, Tensor, tuple, list, dict
    return hide(name, "an object of a class of its own")


# how a report names each way a worker was lost (grader.judge.errors.Lost, a str): the timeouts and the judge's own
# stops as they are said, the others without their exit code, signal or what the worker sent; any other: "ended"
LOST_SHOWN = frozenset({"timed_out", "stopped", "gone"})
LOST_WITHHELD = {"crashed": "crashed", "exited": "exited early", "malformed": "sent something that is not an answer"}


def lost(exc: Exception) -> str:
    """How a worker ended (a WorkerLost, told by its `kind`, never its text): withheld, without the exit code, the
    signal or what its frame held."""
    message, kind = str(exc), getattr(exc, "kind", None)
    if not active() or kind in LOST_SHOWN:
        return message
    return hide(message, LOST_WITHHELD.get(kind, "ended"))
