"""The grader's trainer (grader/lab/train.py) is deterministic: the same seed gives the same weights and losses,
another seed other ones. A few steps of a small baseline on a slice of the toy data: no real training."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from grader.lab import toy
from grader.lab.baseline import Seq2SeqBaseline
from grader.lab.train import TrainConfig, Trainer

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

STEPS = 6
PAIRS = toy.read_split("train")[:256]


@pytest.fixture(autouse=True)
def _threads():
    """Trainer sets torch's thread count for the process: give the next test back the one it had."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def fresh() -> Seq2SeqBaseline:
    """One small untrained model: every run starts from a copy of it, so only the trainer can tell runs apart."""
    torch.manual_seed(0)
    return Seq2SeqBaseline(len(toy.SRC_ITOS), len(toy.TGT_ITOS), embed_dim=8, hidden_dim=16)


def train(model: torch.nn.Module, seed: int, chunks: tuple[int, ...] = (STEPS,), global_seed: int = 123):
    """Copy `model`, train it for `chunks` steps with the trainer's seed `seed`; returns (weights, losses, steps)."""
    model = copy.deepcopy(model)
    torch.manual_seed(global_seed)  # the global generator: the trainer must not depend on it
    cfg = TrainConfig(embed_dim=8, hidden_dim=16, batch_size=8, max_steps=STEPS, seed=seed)
    trainer = Trainer(model, cfg, PAIRS)
    losses: list[float] = []
    for n in chunks:
        trainer.run(n, lambda step, total, loss: losses.append(loss))
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, losses, trainer.step


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_same_seed_gives_the_same_weights_and_losses(fresh):
    first, second = train(fresh, seed=0), train(fresh, seed=0, global_seed=999)
    assert first[2] == second[2] == STEPS and len(first[1]) == STEPS
    assert first[1] == second[1]
    assert same_weights(first[0], second[0])
    assert not same_weights(first[0], fresh.state_dict())  # it did train


def test_another_seed_gives_other_batches_losses_and_weights(fresh):
    zero, one = train(fresh, seed=0), train(fresh, seed=1)
    assert zero[1][0] != one[1][0]  # the first batch already differs
    assert zero[1] != one[1]
    assert not same_weights(zero[0], one[0])


def test_training_in_chunks_takes_the_same_steps_as_in_one_run(fresh):
    whole, chunked = train(fresh, seed=3), train(fresh, seed=3, chunks=(2, 1, 3))
    assert whole[1] == chunked[1]
    assert same_weights(whole[0], chunked[0])


def test_a_run_never_goes_past_max_steps(fresh):
    weights, losses, steps = train(fresh, seed=0, chunks=(4, 100, 5))
    assert steps == STEPS and len(losses) == STEPS
    assert same_weights(weights, train(fresh, seed=0)[0])


def test_a_config_sent_as_a_dict_as_the_judge_sends_it_trains_as_the_config_itself(fresh):
    cfg = TrainConfig(embed_dim=8, hidden_dim=16, batch_size=8, max_steps=STEPS, seed=1)
    as_sent = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}  # grader/cases/util.py's train_steps
    as_sent["betas"] = list(cfg.betas)  # any sequence will do: the trainer makes it a tuple
    model = copy.deepcopy(fresh)
    trainer = Trainer(model, as_sent, PAIRS)
    assert trainer.cfg == cfg
    losses: list[float] = []
    trainer.run(STEPS, lambda step, total, loss: losses.append(loss))
    assert losses == train(fresh, seed=1)[1]


def test_a_checkpoint_between_two_evaluations_holds_the_weights_a_run_of_that_many_steps_ends_with(fresh):
    # grade artifacts keeps the warm starts at train.WARM_STEP, which need not be a multiple of eval_every
    from grader.lab import train as lab_train

    cfg = TrainConfig(embed_dim=8, hidden_dim=16, batch_size=8, max_steps=STEPS, eval_every=4, seed=2, target_acc=2.0)
    model, kept = copy.deepcopy(fresh), {}

    def keep(step: int) -> None:
        kept[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    never = lambda m, pairs: {cfg.target_len: 0.0, cfg.long_len: 0.0}  # noqa: E731 - no decoding: the stop rule never met
    result = lab_train.train(model, cfg, accuracy=never, checkpoint=keep, checkpoint_at=(3, 5, 99))
    assert result.steps == STEPS and sorted(kept) == [3, 5]
    for step in (3, 5):
        alone = copy.deepcopy(fresh)
        Trainer(alone, cfg).run(step)
        assert same_weights(kept[step], alone.state_dict()), step
