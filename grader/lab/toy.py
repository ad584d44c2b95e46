"""The toy translation task: a seeded generator, the committed splits and batching.

Trusted scaffolding: the grader trains and evaluates with this module, never with student code.
The source side is a word salad of toy English; the target is its word-for-word toy French
translation in which every adjective-noun pair is swapped ("red car" -> "voiture rouge"), so a
good alignment is a diagonal with a small crossing at each such pair.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import ROOT

DATA_DIR = ROOT / "datasets" / "toy_translation"  # grader/core/datasets.py reads it, checked
SPLITS = {"train": 12000, "valid": 800, "test": 2000}
MAX_LEN = 40
SEED = 35

NOUNS = dict(pair.split(":") for pair in (
    "cat:chat dog:chien house:maison car:voiture tree:arbre bird:oiseau book:livre city:ville "
    "river:fleuve apple:pomme man:homme woman:femme child:enfant road:route boat:bateau door:porte "
    "horse:cheval fish:poisson desk:bureau chair:chaise window:fenetre garden:jardin bread:pain "
    "cheese:fromage flower:fleur mountain:montagne sea:mer sun:soleil moon:lune star:etoile wall:mur "
    "field:champ forest:foret letter:lettre key:cle cup:tasse shoe:chaussure hat:chapeau king:roi bridge:pont"
).split())
ADJECTIVES = dict(pair.split(":") for pair in (
    "red:rouge green:vert blue:bleu black:noir white:blanc fast:rapide quiet:calme heavy:lourd "
    "round:rond tired:fatigue happy:heureux sad:triste cold:froid hot:chaud empty:vide full:plein "
    "strong:fort rich:riche dark:sombre wet:mouille"
).split())
OTHERS = dict(pair.split(":") for pair in (
    "sees:voit takes:prend likes:aime finds:trouve follows:suit paints:peint eats:mange opens:ouvre "
    "closes:ferme reads:lit writes:ecrit buys:achete sells:vend carries:transporte builds:construit "
    "watches:regarde hears:entend loves:adore leaves:quitte visits:visite the:le a:un and:et near:pres "
    "with:avec under:sous today:aujourdhui again:encore often:souvent never:jamais here:ici there:la "
    "but:mais or:ou without:sans behind:derriere"
).split())
DICTIONARY = {**NOUNS, **ADJECTIVES, **OTHERS}
PAD, SOS, EOS = "<pad>", "<sos>", "<eos>"
SRC_ITOS = [PAD, *DICTIONARY]
TGT_ITOS = [PAD, SOS, EOS, *DICTIONARY.values()]
SRC_STOI = {w: i for i, w in enumerate(SRC_ITOS)}
TGT_STOI = {w: i for i, w in enumerate(TGT_ITOS)}


def alignment(words: list[str]) -> list[int]:
    """The source position each target word translates: in order, except noun before adjective in a pair."""
    out, i = [], 0
    while i < len(words):
        if words[i] in ADJECTIVES and i + 1 < len(words) and words[i + 1] in NOUNS:
            out += [i + 1, i]
            i += 2
        else:
            out.append(i)
            i += 1
    return out


def translate(words: list[str]) -> list[str]:
    """Translate word for word, emitting noun before adjective wherever an adjective precedes a noun."""
    return [DICTIONARY[words[i]] for i in alignment(words)]


def sample_sentence(rng: random.Random, length: int) -> list[str]:
    """Draw `length` source words: adjective-noun pairs (about a third of the words) among single words."""
    words: list[str] = []
    singles = sorted(NOUNS) + sorted(OTHERS)
    while len(words) < length:
        if length - len(words) >= 2 and rng.random() < 0.2:
            words += [rng.choice(sorted(ADJECTIVES)), rng.choice(sorted(NOUNS))]
        else:
            words.append(rng.choice(singles))
    return words


def generate(split: str) -> list[tuple[list[str], list[str]]]:
    """Make one split: source lengths cycle through 1..MAX_LEN so every length is equally present."""
    rng = random.Random(f"{SEED}-{split}")
    pairs = []
    for k in range(SPLITS[split]):
        src = sample_sentence(rng, k % MAX_LEN + 1)
        pairs.append((src, translate(src)))
    return pairs


def split_path(split: str) -> Path:
    return DATA_DIR / f"{split}.tsv"


def write_splits() -> dict[str, str]:
    """Regenerate every split file and return their SHA-256 checksums."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    sums = {}
    for split in SPLITS:
        text = "".join(f"{' '.join(s)}\t{' '.join(t)}\n" for s, t in generate(split))
        split_path(split).write_text(text, encoding="utf-8")
        sums[split] = hashlib.sha256(text.encode()).hexdigest()
    return sums


def read_split(split: str) -> list[tuple[list[str], list[str]]]:
    """The split's pairs, from the committed file only if it is the released one (grader/core/datasets.py)."""
    from grader.core.datasets import split_text

    lines = split_text(split).splitlines()
    return [(s.split(), t.split()) for s, t in (line.split("\t") for line in lines)]


@dataclass
class Batch:
    """Padded id tensors: src (B, T_src), src_mask (B, T_src) bool, tgt (B, T_tgt) from <sos> to <eos>."""

    src: torch.Tensor
    src_mask: torch.Tensor
    tgt: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.src_mask.to(device), self.tgt.to(device))


def encode(pairs: list[tuple[list[str], list[str]]]) -> Batch:
    """Turn word pairs into one padded batch (pad id 0 on both sides)."""
    srcs = [[SRC_STOI[w] for w in s] for s, _ in pairs]
    tgts = [[TGT_STOI[SOS]] + [TGT_STOI[w] for w in t] + [TGT_STOI[EOS]] for _, t in pairs]
    src = torch.zeros(len(pairs), max(map(len, srcs)), dtype=torch.long)
    tgt = torch.zeros(len(pairs), max(map(len, tgts)), dtype=torch.long)
    for b, (s, t) in enumerate(zip(srcs, tgts)):
        src[b, : len(s)] = torch.tensor(s)
        tgt[b, : len(t)] = torch.tensor(t)
    return Batch(src, src != 0, tgt)


def by_length(pairs: list[tuple[list[str], list[str]]]) -> dict[int, list[tuple[list[str], list[str]]]]:
    groups: dict[int, list] = {}
    for pair in pairs:
        groups.setdefault(len(pair[0]), []).append(pair)
    return dict(sorted(groups.items()))


def bucketed_batches(
    pairs: list[tuple[list[str], list[str]]], batch_size: int, generator: torch.Generator
) -> list[Batch]:
    """Shuffle, then cut batches from runs of similar length so little compute goes to pads."""
    order = torch.randperm(len(pairs), generator=generator).tolist()
    chunk = batch_size * 16
    batches = []
    for start in range(0, len(order), chunk):
        window = sorted(order[start : start + chunk], key=lambda i: len(pairs[i][0]))
        for b in range(0, len(window), batch_size):
            batches.append(encode([pairs[i] for i in window[b : b + batch_size]]))
    perm = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in perm]
