"""The lesson notebook's prose and its non-graded code cells, in order; `grader.notebook` assembles them.

Each entry is ("md", text), ("code", text) or ("piece", name); a piece entry becomes that piece's
code, taken from the stubs or the reference when the notebook is built.
"""
from __future__ import annotations

INTRO = r"""# Why attention: the lab notebook

You will give an LSTM encoder-decoder the ability to look back at every source word while it
writes the translation, check that this keeps long sentences accurate, and read the attention
weights as word alignments.

How this notebook works:

- Run the **setup** cell first. All cells share one namespace, so the pieces see each other
  without imports.
- Six code cells start with the line `# piece: <name>`. Those are what gets graded: replace each
  `raise NotImplementedError(...)` and keep the names and signatures.
- `check("<name>")` grades one piece from inside the notebook (see the last section).
"""

SETUP = r"""# Setup: run this cell first.
from __future__ import annotations  # annotations stay unevaluated, as in the .py files, so cell order is free

import os

# Before torch loads: idle OpenMP threads then sleep instead of spinning, which keeps training fast
# when other programs share the CPU (spinning threads can make each step ten times slower).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

from grader import evaluate as trusted  # the grader's own greedy decoder and evaluator
from grader import toy  # the toy translation task: data, vocabularies, batching
from grader.notebook import check
from grader.train import TrainConfig, train

%matplotlib inline
"""

BOTTLENECK = r"""## 1. One vector is not enough

A plain seq2seq model reads the source sentence and hands the decoder only the encoder's final
hidden state. Every output word depends on the source through that one fixed-size vector. Five
words fit into it comfortably; forty do not, and accuracy drops sharply once sentences outgrow
what the vector can carry.

The repair is to stop summarising. Keep the encoder's state at **every** source position, and for
each word the decoder is about to write, build a fresh blend of those states, weighted by how
useful each one is at that moment.

### Piece `encoder`

`EncoderAll.forward` embeds the source ids, runs the LSTM and returns **all** of its outputs,
shape `(B, T_src, H)`, together with the final `(h, c)` (each `(1, B, H)`). The final state still
starts the decoder; the full sequence of outputs is what attention will read.
"""

ADDITIVE = r"""## 2. Additive (Bahdanau) attention

At decoder step $t$ we have the previous decoder state $s_{t-1}$ and the encoder states
$h_1, \dots, h_{T}$. Three lines define the mechanism:

$$e_{t,i} = v^\top \tanh\left(W_h h_i + W_s s_{t-1}\right)$$

$$\alpha_{t,i} = \frac{\exp(e_{t,i})}{\sum_j \exp(e_{t,j})}$$

$$c_t = \sum_i \alpha_{t,i}\, h_i$$

The score is a one-hidden-layer network that rates how well source position $i$ suits the
decoder's current need. $W_h$ and $W_s$ are $H \times H$ matrices, $v$ is a vector of length $H$,
and that is all the new machinery. Every step is differentiable, so the model learns where to
look from the translation loss alone.

### A worked example you can redo by hand

Let $H = 2$, $W_h = W_s = I$, $v = [1, 1]$, encoder states $h_1 = [1, 0]$, $h_2 = [0, 1]$,
$h_3 = [1, 1]$ and $s_{t-1} = [0.5, 0.5]$.

- Inside the $\tanh$: $[1.5, 0.5]$, $[0.5, 1.5]$ and $[1.5, 1.5]$.
- With $\tanh(1.5) \approx 0.905$ and $\tanh(0.5) \approx 0.462$ the scores are
  $e \approx (1.367,\ 1.367,\ 1.810)$.
- The softmax turns them into $\alpha \approx (0.281,\ 0.281,\ 0.438)$: the third state gets the
  biggest share, the other two still count.
- The context is $c \approx 0.281\,h_1 + 0.281\,h_2 + 0.438\,h_3 = [0.719, 0.719]$.

Had the loss preferred $h_2$, its gradient would move $W_h$, $W_s$ and $v$ to raise $e_2$: attention
is an alignment that is learned softly, by gradient descent. The next cell recomputes these numbers.
"""

WORKED = r"""# The worked example with plain tensors (W_h = W_s = I, v = [1, 1]); no piece code involved.
h_demo = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # h_1, h_2, h_3
s_demo = torch.tensor([0.5, 0.5])  # s_{t-1}
e_demo = torch.tanh(h_demo + s_demo).sum(-1)  # v^T tanh(W_h h_i + W_s s)
alpha_demo = torch.softmax(e_demo, dim=0)
print("scores", e_demo, "\nalpha ", alpha_demo, "\ncontext", alpha_demo @ h_demo)
"""

MASKING = r"""### Masking the pads

Sentences in a batch are padded to a common length, and the encoder still emits states at the
pad positions; they carry nothing useful. Before the softmax, set the scores there to $-\infty$
with `scores.masked_fill(~src_mask, float("-inf"))` (`src_mask` is `True` at real tokens). Since
$\exp(-\infty) = 0$, pads receive weight exactly 0 and the real positions' weights still sum to 1.
Zeroing the weights *after* the softmax would not do: the rest would no longer sum to 1.

### Piece `additive`

`BahdanauAttention.forward(encoder_outputs, decoder_state, src_mask)` returns `(context, alpha)`
with shapes `(B, H)` and `(B, T_src)`. Use `attention_context` (the next piece) for the weighted
sum. Optional speed-up: $W_h h_i$ does not depend on $t$, so it can be computed once per sentence.
"""

CONTEXT = r"""## 3. The context vector as one batched product

$c = \sum_i \alpha_i h_i$ for every sentence at once is a batched matrix product: view `alpha` as
`(B, 1, T_src)`, multiply by the encoder outputs `(B, T_src, H)` with `torch.bmm`, get
`(B, 1, H)` and drop the middle dimension. A Python loop over positions would give the same
numbers far more slowly; the piece asks for the single product.

### Piece `context`
"""

LUONG = r"""## 4. Luong attention: a scaled dot product

Luong and colleagues noticed that the little scoring network is not essential: the plain dot
product $h_i \cdot s$ scores every position in one matrix product and has no parameters at all.
We use the scaled form that the transformer later adopted:

$$e_i = \frac{h_i \cdot s}{\sqrt{d}}$$

**Why divide by $\sqrt{d}$?** If the components of $h_i$ and $s$ are roughly independent with unit
variance, their dot product is a sum of $d$ such products: its variance is about $d$ and its typical
size about $\sqrt{d}$. With $d = 256$ scores of $\pm 16$ are typical, which makes the
softmax almost one-hot, and an almost one-hot softmax passes back almost no gradient. Dividing by
$\sqrt{d}$ brings the scores back to unit scale whatever the width. Masking and the context are
exactly as in the additive piece.

### Piece `luong`

`LuongDotAttention.forward(encoder_outputs, decoder_state, src_mask)` returns `(context, alpha)`.
"""

DECODER = r"""## 5. One decoder step, and teacher forcing

`AttnDecoder.forward_step` writes one target position:

1. embed the previous token `y_prev` `(B, 1)` into `(B, E)`;
2. attend with the previous hidden state `h_prev` as the query ($s_{t-1}$) to get `context` and `alpha`;
3. run the `LSTMCell` on the concatenation `[embedding; context]` from `(h_prev, c_prev)`;
4. compute the logits from `[h; context]` with the output layer.

`Seq2SeqAttn.forward` encodes the source, starts the decoder from the encoder's final state (drop
the layer dimension), feeds `tgt[:, :1]` (`<sos>`) first and loops over the remaining target
positions, stacking the logits into `(B, T_tgt - 1, V)` and the weights into `(B, T_tgt - 1, T_src)`.

**Teacher forcing.** In training, the next input is the *correct* previous token `tgt[:, t]`, not
the model's own guess. An early mistake then cannot derail the rest of the sentence, and every step
receives a useful gradient from the very first update. A `teacher_forcing_ratio` below 1 mixes in
the model's own argmax now and then. At test time there is no correct token to feed, which is the
next piece.

### Piece `decoder`
"""

EVALUATION = r"""## 6. Greedy decoding and accuracy by length

`greedy_decode` runs the same loop as the model's forward pass, but each step's input is the
model's own previous argmax, starting from `sos`, for `steps` steps.

`accuracy_by_length` decodes `tgt.size(1) - 1` tokens, compares them with `tgt[:, 1:]` at non-pad
positions only (pad id 0), and groups sentences by their real source length (`src_mask.sum(1)`).
Within a group it pools: correct tokens over real tokens, not an average of per-sentence scores.

### Piece `evaluation`
"""

TRAIN_MD = r"""## 7. Train the model

The next cell trains your `Seq2SeqAttn` with the grader's own training loop, the same seeded
schedule the `decoder` piece's last case runs: Adam, gradient clipping, batches of similar
lengths, and an early stop once 30-word validation sentences reach 0.98 token accuracy and
40-word ones 0.95 (the graded case stops on the 30-word condition alone). Expect
a minute or a few on a laptop CPU. (The environment variable `ATTNLAB_NOTEBOOK_STEPS` caps the
number of steps; the project's own tests use it to run this notebook quickly.)
"""

TRAIN = r"""# Train with the grader's trusted loop; your pieces supply the model.
cfg = TrainConfig()
if os.environ.get("ATTNLAB_NOTEBOOK_STEPS"):  # a cap for quick runs; the one-cycle warm-up needs 20 steps
    cfg.max_steps = min(cfg.max_steps, max(20, int(os.environ["ATTNLAB_NOTEBOOK_STEPS"])))
torch.manual_seed(cfg.seed)
model = Seq2SeqAttn(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)


def show_progress(step: int, total: int, loss: float) -> None:
    if step % 100 == 0 or step == total:
        print(f"step {step:4d}/{total}  loss {loss:.3f}")


result = train(model, cfg, progress=show_progress)
print(f"{result.steps} steps in {result.seconds:.0f} s; "
      f"accuracy at length {cfg.target_len}: {result.history[-1][2]:.3f}")
"""

CURVE_MD = r"""## 8. The length curve

A model without attention typically stays accurate on short sentences and falls apart somewhere
past ten words. With attention the curve should stay close to flat all the way to
40 words: each output word fetches the source word it needs, however long the sentence. (With
capped training the curve is low everywhere; that says nothing about your code.)
"""

CURVE = r"""# Pooled greedy token accuracy for every source length of the test split (the grader's evaluator).
test_pairs = toy.read_split("test")
acc = trusted.accuracy_by_length(model, test_pairs)
lengths = sorted(acc)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(lengths, [acc[n] for n in lengths], marker="o")
ax.set(xlabel="source length (words)", ylabel="token accuracy", ylim=(0, 1.02), title="Accuracy by source length")
ax.grid(alpha=0.3)
plt.show()
"""

HEATMAP_MD = r"""## 9. Attention weights as alignments

`alpha[t, i]` says how much the model looked at source word $i$ while writing output word $t$.
As a heat map (source along x, output along y) a trained model shows a bright diagonal: the toy
language translates word for word, except that an adjective and its noun swap places ("red car"
becomes "voiture rouge"), so expect a small cross at every such pair. Nobody told the model about
alignments; they fall out of the translation loss. A caution: the weights show where the model
looked, which is not a full explanation of why it chose a word.
"""

HEATMAP = r"""# One test sentence with an adjective-noun pair, decoded greedily; its weights as a heat map.
pair = next(p for p in test_pairs if len(p[0]) == 12 and any(w in toy.ADJECTIVES for w in p[0]))
batch = toy.encode([pair])
pred, weights = trusted.greedy(model, batch)  # (1, T_tgt - 1) and (1, T_tgt - 1, T_src)
src_words = [toy.SRC_ITOS[i] for i in batch.src[0].tolist()]
out_words = [toy.TGT_ITOS[i] for i in pred[0].tolist()]
fig, ax = plt.subplots(figsize=(6.5, 6))
image = ax.imshow(weights[0].numpy(), cmap="Blues", vmin=0, vmax=1)
ax.set_xticks(range(len(src_words)), src_words, rotation=60)
ax.set_yticks(range(len(out_words)), out_words)
ax.set(xlabel="source word (English)", ylabel="model output (toy French)", title="Where your Bahdanau model looks")
fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight α")
plt.tight_layout()
plt.show()
"""

LUONG_TRAIN_MD = r"""## 10. Luong's model: train it and compare

The lesson's shortcut, dropping `LuongDotAttention` into the decoder above in place of the additive
module, learns this task slowly: with the same loop and budget it reaches about 0.53 token accuracy
at 30 words against Bahdanau's 0.99 (the README's table). The dot score there compares the
*previous* decoder state, an LSTM output in $(-1, 1)^H$, with the encoder states directly; nothing
learned can sharpen those dot products.

Luong, Pham and Manning (2015) built the decoder around the score differently, and the lab's
`Seq2SeqLuong` (in `grader/luong_model.py`) follows them, with your `LuongDotAttention` inside:

1. run the `LSTMCell` first, then attend with the **current** state $h_t$;
2. score with a projected query, $e_i = (W_a h_t) \cdot h_i / \sqrt{d}$ (their "general" score, computed
   by your dot product);
3. predict from the attentional vector $\tilde h_t = \tanh(W_c [c_t; h_t])$;
4. input feeding: $\tilde h_{t-1}$ joins the embedding as the next step's input.

The cell trains it with the grader's loop (about a minute on a laptop CPU); the next one compares
the two models.
"""

LUONG_TRAIN = r"""# Luong's decoder (the lab's code) around your LuongDotAttention, trained with the same trusted loop.
from grader.luong_model import Seq2SeqLuong
from grader.train import luong as luong_schedule

lcfg = luong_schedule()
if os.environ.get("ATTNLAB_NOTEBOOK_STEPS"):
    lcfg.max_steps = min(lcfg.max_steps, max(20, int(os.environ["ATTNLAB_NOTEBOOK_STEPS"])))
torch.manual_seed(lcfg.seed)
luong_model = Seq2SeqLuong(len(toy.SRC_ITOS), len(toy.TGT_ITOS), lcfg.embed_dim, lcfg.hidden_dim, LuongDotAttention())
luong_result = train(luong_model, lcfg, progress=show_progress)
print(f"{luong_result.steps} steps in {luong_result.seconds:.0f} s; "
      f"accuracy at length {lcfg.target_len}: {luong_result.history[-1][2]:.3f}")
"""

COMPARE_MD = r"""## 11. Bahdanau against Luong

Three pictures of the same question. The length curves of your two models, beside the
no-attention baseline the grader trained with the same loop; the two heat maps for one sentence,
the expected alignment outlined; and the cost of one training step of each. The lesson says the
two scores perform about the same and that Luong's is cheaper: check both claims against what you
see here and in the README's table.
"""

COMPARE = r"""# Length curves, heat maps side by side, and seconds per training step.
import tempfile
import time
from pathlib import Path

from grader import artifacts, plots

luong_acc = trusted.accuracy_by_length(luong_model, test_pairs)
curves = {"your Bahdanau model": acc, "your Luong model": luong_acc}
try:
    curves["no attention"] = artifacts.load_curves()["baseline"]
except (OSError, KeyError, RuntimeError):
    pass
fig, ax = plt.subplots(figsize=(6, 3.5))
for label, curve in curves.items():
    ax.plot(sorted(curve), [curve[n] for n in sorted(curve)], marker="o", markersize=3, label=label)
ax.set(xlabel="source length (words)", ylabel="token accuracy", ylim=(0, 1.02), title="Accuracy by source length")
ax.grid(alpha=0.3)
ax.legend(frameon=False)
plt.show()

panels = []
for name, m in (("Bahdanau (additive)", model), ("Luong (scaled dot)", luong_model)):
    m.eval()
    pred, weights = trusted.greedy(m, batch)
    panels.append((name, weights[0], [toy.TGT_ITOS[i] for i in pred[0].tolist()], []))
# drawn to a temporary file, shown below: nothing new appears in exercises/ for git to pick up
path = plots.heatmaps(panels, src_words, Path(tempfile.mkdtemp()) / "heatmaps.png", "Where each model looks",
                      expected=[*toy.alignment(pair[0]), None])
from IPython.display import Image, display
display(Image(str(path)))

step_batch = toy.encode([p for p in toy.read_split("train") if 20 <= len(p[0]) <= 30][:32])
for name, m in (("Bahdanau", model), ("Luong", luong_model)):
    m.train()
    t0 = time.perf_counter()
    for _ in range(5):
        logits, _ = m(step_batch.src, step_batch.src_mask, step_batch.tgt)
        F.cross_entropy(logits.reshape(-1, logits.size(-1)), step_batch.tgt[:, 1:].reshape(-1), ignore_index=0).backward()
    print(f"{name}: {(time.perf_counter() - t0) / 5 * 1000:.0f} ms per training step (forward and backward, B=32)")
"""

CHECK_MD = r"""## Check your work

`check("<piece>")` grades one piece from inside this notebook. It takes the most recently run
cell that contains the line `# piece: <piece>`, writes it to a temporary file and runs that
piece's hidden cases in separate processes: your code is never run in this kernel by the check.
The other pieces come from the reference solution, so a mistake costs only the piece it is in.
`quick=True` (the default) leaves out the slow case that trains your model;
`check("decoder", quick=False)` includes it.

Pieces: `encoder`, `additive`, `context`, `luong`, `decoder`, `evaluation`.
"""

CHECK = r"""# Grade the additive piece; call check() with any other piece name the same way.
runs = check("additive")
"""

CELLS: list[tuple[str, str]] = [
    ("md", INTRO), ("code", SETUP),
    ("md", BOTTLENECK), ("piece", "encoder"),
    ("md", ADDITIVE), ("code", WORKED), ("md", MASKING), ("piece", "additive"),
    ("md", CONTEXT), ("piece", "context"),
    ("md", LUONG), ("piece", "luong"),
    ("md", DECODER), ("piece", "decoder"),
    ("md", EVALUATION), ("piece", "evaluation"),
    ("md", TRAIN_MD), ("code", TRAIN),
    ("md", CURVE_MD), ("code", CURVE),
    ("md", HEATMAP_MD), ("code", HEATMAP),
    ("md", LUONG_TRAIN_MD), ("code", LUONG_TRAIN),
    ("md", COMPARE_MD), ("code", COMPARE),
    ("md", CHECK_MD), ("code", CHECK),
]
