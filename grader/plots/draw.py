"""Pictures of a submission: attention heatmaps and accuracy against source length.

`main` runs in the grader's process and never imports submission code: grader.plots.models trains the
submission's Seq2SeqAttn and Luong's model around its LuongDotAttention in jailed workers, as grading
does, and decodes them here; this module draws what comes back.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib

if "matplotlib.pyplot" not in sys.modules:  # a notebook that already plots keeps its own backend
    matplotlib.use("Agg")  # headless: the grader runs on servers and in CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from grader.plots.models import LOADED, PlotError  # noqa: E402, F401 - re-exported: grade --plots and tests catch it here
from grader.runner.report import safe  # noqa: E402
from grader.worker.limits import MEMORY_GB, PIECE_TIMEOUT  # noqa: E402

STEPS_ENV = "ATTNLAB_PLOT_STEPS"  # a smaller training budget, for tests and quick looks
STYLE = {"font.size": 10, "axes.titlesize": 12, "axes.titleweight": "bold", "axes.labelsize": 10,
         "axes.spines.top": False, "axes.spines.right": False, "savefig.dpi": 150}


def _as_array(alpha, src_words: Sequence[str], tgt_words: Sequence[str]) -> np.ndarray:
    a = np.asarray(getattr(alpha, "detach", lambda: alpha)(), dtype=float)  # (T_tgt, T_src)
    if a.shape != (len(tgt_words), len(src_words)):
        raise ValueError(f"alpha has shape {a.shape}; expected ({len(tgt_words)}, {len(src_words)}) for the words given")
    return a


def _draw_weights(ax, a: np.ndarray, src_words: Sequence[str], tgt_words: Sequence[str], mistakes: Sequence[int],
                  expected: Sequence[int | None]):
    """One heat map on `ax`: source words on x, outputs on y, wrong outputs in red, the expected cells outlined."""
    im = ax.imshow(a, cmap="Blues", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
    ax.set_xticks(range(len(src_words)), src_words, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(tgt_words)), tgt_words)
    for i in mistakes:  # a wrong prediction is worth seeing next to where the model looked
        ax.get_yticklabels()[i].set_color("#c0392b")
    for t, j in enumerate(expected):
        if j is not None:
            ax.add_patch(plt.Rectangle((j - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="#e67e22", linewidth=1.6, zorder=3))
    # thin white lines between cells keep neighbouring strong weights apart
    ax.set_xticks(np.arange(-0.5, len(src_words)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(tgt_words)), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.2)
    ax.tick_params(which="both", length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("source word (English)")
    return im


def heatmaps(
    panels: Sequence[tuple[str, object, Sequence[str], Sequence[int]]], src_words: Sequence[str], path: Path, title: str,
    *, expected: Sequence[int | None] = (), caption: str = "",
) -> Path:
    """Heat maps of one source sentence side by side, one per (subtitle, alpha, output words, mistakes) panel,
    sharing the colour scale and the expected alignment: each alpha (T_tgt, T_src), source words on x and output
    words on y, the rows in `mistakes` labelled red; expected[t], when given, is the source position output t
    translates, outlined so the reader can compare where the model looked with where it should have."""
    arrays = [_as_array(alpha, src_words, words) for _, alpha, words, _ in panels]
    cell = 0.42  # inches per cell: room for a word at 9 pt once it is rotated
    rows = max(len(words) for _, _, words, _ in panels)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(1.2 + (1.4 + cell * len(src_words)) * len(panels),
                                                         1.6 + cell * rows), layout="constrained", squeeze=False)
        if len(panels) == 1 and not (title and panels[0][0]):
            title, panels = "", [(title or panels[0][0], *panels[0][1:])]  # one panel, one title: on the panel
        for ax, (subtitle, _, words, mistakes), a in zip(axes[0], panels, arrays):
            im = _draw_weights(ax, a, src_words, words, mistakes, expected)
            ax.set_title(subtitle, loc="left")
        axes[0][0].set_ylabel("decoder output (toy French)")
        if title:
            fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=13)
            # the layout's default 3 pt between the figure title and the panels' titles reads as one line
            fig.get_layout_engine().set(h_pad=6 / 72, hspace=0.0)
        bar = fig.colorbar(im, ax=list(axes[0]), shrink=min(1.0, 0.25 + 0.05 * rows), pad=0.02)
        bar.set_label("attention weight α")
        bar.outline.set_visible(False)
        if caption:
            _caption(fig, caption)
        return _save(fig, path)


LINES = {"bold": {"linewidth": 2.4, "marker": "o", "markersize": 3.5, "zorder": 5},
         "band": {"linewidth": 6, "alpha": 0.45, "solid_capstyle": "round", "zorder": 2},
         "dashed": {"linewidth": 1.6, "linestyle": "--", "marker": "o", "markersize": 2.5, "zorder": 4}}


def length_curve(
    curves: dict[str, dict[int, float]], path: Path, title: str, *, mark: int | None = None, caption: str = "",
    styles: Sequence[tuple[str, str]] = (),
) -> Path:
    """Plot accuracy against source length, one line per model.

    styles[k] = (kind, colour) for curve k, kind one of LINES: "bold", "band" (a wide pale line beneath,
    visible even where it coincides with a bold one) or "dashed". Without styles the first curve is bold,
    the second a band and the rest dashed.
    """
    colors = ["#1f4e99", "#8a96a3", "#c0392b", "#8e44ad", "#d68910"]
    default = [("bold", colors[0]), ("band", colors[1])] + [("dashed", c) for c in colors[2:]] * 4
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9.5, 4.4), layout="constrained")  # wide enough for the legend beside it
        longest = 1
        for k, (label, curve) in enumerate(curves.items()):
            xs = sorted(curve)
            longest = max(longest, *xs) if xs else longest
            kind, color = styles[k] if k < len(styles) else default[k % len(default)]
            ax.plot(xs, [curve[x] for x in xs], label=label, color=color, **LINES[kind])
        if mark is not None:
            ax.axvline(mark, color="#999999", linewidth=1, linestyle=":", zorder=1)
            # above the axes, where no curve can run through it
            ax.text(mark, 1.01, f"graded at {mark} words", transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=8, color="#777777")
        ax.set_ylim(0, 1.02)
        ax.set_xlim(0.5, longest + 0.5)
        ax.set_xlabel("source length (words)")
        ax.set_ylabel("greedy token accuracy")
        ax.set_title(title, loc="left")
        ax.grid(alpha=0.3, linewidth=0.6)
        # beside the axes: inside, a student's curve can run anywhere, through the legend too
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)
        if caption:
            _caption(fig, caption)
        return _save(fig, path)


def _caption(fig: plt.Figure, text: str) -> None:
    """A grey footnote under everything else in the figure (x tick labels, axis labels), never over it.

    The layout engine does not place free text, so the figure is laid out first, the footnote set a line
    below the lowest thing drawn, and the layout frozen so that saving keeps those positions."""
    fig.draw_without_rendering()  # runs the layout on any backend (a notebook's included)
    lowest = min(a.get_tightbbox().y0 for a in fig.axes)  # pixels from the bottom; may be below 0
    gap = 6 / 72 * fig.dpi
    fig.set_layout_engine("none")
    y = (lowest - gap) / fig.bbox.height
    fig.text(0.01, y, text, ha="left", va="top", fontsize=8, color="#555555", wrap=True, linespacing=1.4)


def fresh(path: Path) -> Path:
    """`path`, with whatever stood there removed (a link is removed, never followed): a plots folder comes from a
    student's repository, where plots/heatmap.png may be a link to a file of the instructor's."""
    path = Path(path)
    if os.path.islink(path.parent):
        raise PlotError(f"{path.parent} is a symbolic link; pass a real folder for the plots")
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            raise PlotError(f"{path} is a folder; remove it or pass another folder for the plots")
        os.unlink(path)
    return path


def _save(fig: plt.Figure, path: Path) -> Path:
    path = fresh(path)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15, facecolor="white")  # tight: keeps the caption
    plt.close(fig)
    return path


def main(*, submission: Path, out: Path, timeout: float = PIECE_TIMEOUT, memory_gb: float = MEMORY_GB) -> list[Path]:
    """Train the submission's two models in jailed workers (grader.plots.models), draw them here, and return
    the PNGs; PlotError on failure. No student code runs in this process."""
    from dataclasses import replace

    from grader.lab import toy
    from grader.lab import train
    from grader.plots.models import train_both

    submission, out = Path(submission).resolve(), Path(out).resolve()
    if not submission.is_dir():
        raise PlotError(f"{submission} is not a folder; pass the folder that holds your encoder.py, decoder.py, ...")
    if not any((submission / f"{stem}.py").is_file() for stem in LOADED):
        files = ", ".join(f"{stem}.py" for stem in LOADED)
        raise PlotError(f"{submission} holds none of {files}; pass the folder laid out like exercises/")
    sealed_here()
    cfgs = {"Bahdanau": train.TrainConfig(), "Luong": train.luong()}
    if os.environ.get(STEPS_ENV):
        if not os.environ[STEPS_ENV].isdigit() or int(os.environ[STEPS_ENV]) < 1:
            raise PlotError(f"{STEPS_ENV}={os.environ[STEPS_ENV]!r} is not a positive whole number of training steps; "
                            "unset it to train with the grader's schedule")
        steps = int(os.environ[STEPS_ENV])
        cfgs = {k: replace(c, max_steps=steps, short_steps=min(c.short_steps, steps), eval_every=min(c.eval_every, steps))
                for k, c in cfgs.items()}
    fresh(out / "plots.json")  # the folder checked (no link) before anything trains
    src, tgt = _pick_sentence(toy.read_split("test"))
    trained, notes, own = train_both(submission, cfgs, (src, tgt), timeout, memory_gb)
    for note in notes:
        print(f"plots: note: {safe(note, 400)}", file=sys.stderr, flush=True)  # it may quote the student's exception
    _draw(trained, submission, out, (src, tgt), notes, own)
    return [out / "heatmap.png", out / "length_curve.png"]


def sealed_here() -> None:
    """PlotError in a student release whose sealed bundle is not opened (no seal key): the plots decode with the lab's
    evaluator and train Luong's model, which it seals (grader.lab.SEALED) because they would answer pieces."""
    from grader import lab
    from grader.runner import layout

    try:
        layout.current()  # opens the bundle where the key is set, and with it the sealed lab modules
    except layout.SealError as e:
        raise PlotError(str(e)) from None
    if lab.missing():
        raise PlotError("this release seals the lab's evaluator and Luong's model with the hidden cases (they would "
                        "answer the encoder, decoder and evaluation pieces), and the plots need both: they run where "
                        "the seal key is set; exercises/lesson.ipynb draws your Bahdanau model's curve and heat map "
                        "with your own evaluation piece")


def _short(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or "no message"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pick_sentence(pairs: list) -> tuple[list[str], list[str]]:
    """A test sentence of about 12 distinct words with the most adjective-noun pairs (each pair is a crossing)."""
    from grader.lab import toy

    def crossings(src: list[str]) -> int:
        return sum(a in toy.ADJECTIVES and b in toy.NOUNS for a, b in zip(src, src[1:]))

    # distinct words first: a repeated word makes two columns a reader cannot tell apart
    def rank(i: int) -> tuple:
        src = pairs[i][0]
        return crossings(src) < 2, len(set(src)) < len(src), abs(len(src) - 12), -crossings(src), i

    return pairs[min(range(len(pairs)), key=rank)]


def _alignment(src: list[str]) -> list[int | None]:
    """The source position each target word translates (toy's swap rule), None for the final <eos>."""
    from grader.lab import toy

    return [*toy.alignment(src), None]


def _uses() -> dict[str, tuple[str, ...]]:
    from grader.core.pieces import PIECES, run_order

    return {model: tuple(p for p in run_order(list(PIECES)) if model in PIECES[p].plots) for model in ("Bahdanau", "Luong")}


# the student's pieces each model is built from (the registry's `plots`; the Luong model's encoder and loop are the lab's)
USES = _uses()


def label(name: str, own: list[str]) -> str:
    """What a drawn model is: "your Bahdanau model", "Bahdanau (yours, with the reference's encoder)", or
    "Bahdanau from the reference's pieces (none of yours yet)", so a figure never calls the reference the student's."""
    mine = [s for s in USES[name] if s in own]
    theirs = [s for s in USES[name] if s not in own]
    if not theirs:
        return f"your {name} model"
    if not mine:
        return f"{name} from the reference's pieces (none of yours yet)"
    return f"{name} (yours, with the reference's {', '.join(theirs)})"


def _draw(trained: dict, submission: Path, out: Path, sentence: tuple, notes: list[str], own: list[str]) -> None:
    """Write heatmap.png, length_curve.png and plots.json into `out` from the trained models' readings."""
    from grader.lab import artifacts

    src, tgt = sentence
    acc, panels, record, steps = {}, [], {}, {}
    for name, t in trained.items():
        acc[name], steps[name] = t.acc, t.steps
        score = "additive" if name == "Bahdanau" else "scaled dot"
        panels.append((f"{label(name, own)} ({score} scores), {t.steps} steps", t.alpha, t.said, t.wrong))
        record[name] = {"accuracy_by_length": {str(n): round(a, 4) for n, a in t.acc.items()},
                        "steps": t.steps, "predicted": t.said}
    key = "orange boxes: the source word each output translates" + (
        "; red labels: wrong words" if any(p[3] for p in panels) else "")
    whose = "your models" if any(label(n, own).startswith("your") for n in trained) else (
        "the models" if any(s in own for n in trained for s in USES[n]) else "the reference's models")
    heatmaps(panels, src, out / "heatmap.png", f"Where {whose} look while they translate ({submission.name}/)",
             expected=_alignment(src), caption="\n".join([f"expected: {' '.join(tgt)}", key, *notes]))
    curves = {label(name, own): acc[name] for name in trained}
    styles = [("bold", "#1f4e99"), ("bold", "#d68910")]
    try:
        ref = artifacts.load_curves()
        curves["reference Bahdanau"] = ref["reference"]
        curves["reference Luong"] = ref["luong"]
        curves["no attention (encoder's last state only)"] = ref["baseline"]
        styles += [("band", "#8a96a3"), ("band", "#f0c27b"), ("dashed", "#c0392b")]
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        notes.append(f"the reference curves are unavailable ({_short(e)}); run `grade artifacts`")
    length_curve(curves, out / "length_curve.png", "Accuracy against sentence length", mark=30, styles=styles,
                 caption="\n".join([
                     "test split, 50 sentences per length. Your models: "
                     + ", ".join(f"{name} {steps[name]} steps" for name in trained)
                     + " of the grader's training loop; the others: their full schedules (grader/artifacts/curves.json).",
                     *notes]))
    record.update(notes=notes, heatmap={"source": src, "expected": tgt}, curves=list(curves))
    fresh(out / "plots.json").write_text(json.dumps(record, indent=1) + "\n")
