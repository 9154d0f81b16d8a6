"""Learning-rate schedulers: lr sequences against PyTorch's closed forms, SequentialLR, state dicts, errors."""

import math

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import optim
from namedtensor.optim import lr_scheduler

pytestmark = pytest.mark.usefixtures("backend")

BASE = 0.1


def make_opt(lrs=(BASE,)):
    params = [nt.tensor(np.ones(2), names=("a",), requires_grad=True) for _ in lrs]
    return optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)], lr=lrs[0])


def sequence(opt, sched, n):
    """The lrs of group 0 at epochs 0..n-1 (as the optimizer sees them), checking get_last_lr agrees."""
    out = []
    for _ in range(n):
        lrs = sched.get_last_lr()
        assert lrs == [g["lr"] for g in opt.param_groups]
        out.append(lrs[0])
        opt.step()
        sched.step()
    return out


def close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-15)


CASES = {
    "step": (lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.5), lambda e: BASE * 0.5 ** (e // 3)),
    "multistep": (lambda o: lr_scheduler.MultiStepLR(o, milestones=[6, 2, 2], gamma=0.1),
                  lambda e: BASE * 0.1 ** ((e >= 2) * 2 + (e >= 6))),
    "exponential": (lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9), lambda e: BASE * 0.9 ** e),
    "cosine": (lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=8, eta_min=0.001),
               lambda e: 0.001 + (BASE - 0.001) * (1 + math.cos(math.pi * e / 8)) / 2),
    "linear": (lambda o: lr_scheduler.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=4),
               lambda e: BASE * (0.1 + 0.9 * min(e, 4) / 4)),
    "linear-decay": (lambda o: lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=5),
                     lambda e: BASE * max(0.0, 1 - e / 5)),
    "lambda": (lambda o: lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + e)), lambda e: BASE / (1 + e)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lr_sequence_matches_the_closed_form(case):
    make, formula = CASES[case]
    opt = make_opt()
    sched = make(opt)
    close(sequence(opt, sched, 20), [formula(e) for e in range(20)])
    assert sched.last_epoch == 20
    assert opt.param_groups[0]["initial_lr"] == BASE


def test_known_values():
    # a few values as PyTorch prints them
    opt = make_opt()
    close(sequence(opt, lr_scheduler.CosineAnnealingLR(opt, T_max=4), 5),
          [0.1, 0.085355339059327, 0.05, 0.014644660940673, 0.0])
    opt = make_opt()
    close(sequence(opt, lr_scheduler.LinearLR(opt, total_iters=3), 5),
          [0.1 / 3, 0.1 * 5 / 9, 0.1 * 7 / 9, 0.1, 0.1])


def test_cosine_goes_back_up_after_t_max_as_pytorch():
    opt = make_opt()
    lrs = sequence(opt, lr_scheduler.CosineAnnealingLR(opt, T_max=3), 7)
    close(lrs[3:], [0.0, 0.025, 0.075, 0.1])


def test_each_group_follows_its_own_initial_lr():
    opt = make_opt((0.1, 0.02))
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        sched.step()
    close(sched.get_last_lr(), [0.1 / 8, 0.02 / 8])
    opt = make_opt((0.1, 0.02))
    sched = lr_scheduler.LambdaLR(opt, [lambda e: e, lambda e: 2.0])
    sched.step()
    close(sched.get_last_lr(), [0.1, 0.04])


def test_warm_up_then_cosine():
    opt = make_opt()
    warm = lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=4)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.0)
    sched = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[4])
    lrs = sequence(opt, sched, 16)
    expected = [BASE * (0.25 + 0.75 * e / 4) for e in range(4)]
    expected += [BASE * (1 + math.cos(math.pi * e / 10)) / 2 for e in range(12)]
    close(lrs, expected)
    assert max(lrs) == pytest.approx(BASE)


def test_sequential_with_three_stages():
    opt = make_opt()
    scheds = [lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2),
              lr_scheduler.StepLR(opt, step_size=1, gamma=1.0),
              lr_scheduler.ExponentialLR(opt, gamma=0.5)]
    sched = lr_scheduler.SequentialLR(opt, scheds, milestones=[2, 4])
    close(sequence(opt, sched, 7), [0.05, 0.075, 0.1, 0.1, 0.1, 0.05, 0.025])


@pytest.mark.parametrize("case", ["cosine", "linear", "lambda", "sequential"])
def test_state_dict_round_trip_resumes_the_schedule(case):
    def build():
        opt = make_opt()
        if case == "sequential":
            return opt, lr_scheduler.SequentialLR(opt, [lr_scheduler.LinearLR(opt, 0.1, total_iters=3),
                                                        lr_scheduler.CosineAnnealingLR(opt, T_max=6)], [3])
        return opt, CASES[case][0](opt)

    opt, sched = build()
    full = sequence(opt, sched, 10)
    opt, sched = build()
    sequence(opt, sched, 4)
    opt_sd, sched_sd = opt.state_dict(), sched.state_dict()
    assert "optimizer" not in sched_sd
    opt2, sched2 = build()
    opt2.load_state_dict(opt_sd)
    sched2.load_state_dict(sched_sd)
    assert sched2.get_last_lr() == sched.get_last_lr()
    close(sequence(opt2, sched2, 6), full[4:])


def test_lambda_state_dict_saves_callable_objects_not_functions():
    class Warm:
        def __init__(self):
            self.scale = 2.0

        def __call__(self, e):
            return self.scale * e

    opt = make_opt((0.1, 0.2))
    sched = lr_scheduler.LambdaLR(opt, [lambda e: 1.0, Warm()])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [None, {"scale": 2.0}]
    w = Warm()
    w.scale = 0.0
    sched2 = lr_scheduler.LambdaLR(make_opt((0.1, 0.2)), [lambda e: 1.0, w])
    sched2.load_state_dict(sd)
    assert w.scale == 2.0


def test_resuming_with_last_epoch_needs_initial_lr():
    opt = make_opt()
    with pytest.raises(KeyError, match="param group 0 has no 'initial_lr'"):
        lr_scheduler.StepLR(opt, step_size=2, last_epoch=5)
    lr_scheduler.StepLR(opt, step_size=2)  # records initial_lr
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5, last_epoch=5)
    assert sched.last_epoch == 6
    close(sched.get_last_lr(), [BASE * 0.125])


def test_errors():
    opt = make_opt()
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        lr_scheduler.StepLR([], step_size=1)
    with pytest.raises(ValueError, match="step_size must be a positive integer, got 0"):
        lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max must be a positive integer, got 2.5"):
        lr_scheduler.CosineAnnealingLR(opt, T_max=2.5)
    with pytest.raises(ValueError, match=r"start_factor must be in \(0, 1\], got 0"):
        lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match=r"end_factor must be in \[0, 1\], got 1.5"):
        lr_scheduler.LinearLR(opt, end_factor=1.5)
    with pytest.raises(ValueError, match="expected 1 lr_lambdas \\(one per param group\\), got 2"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1, lambda e: 1])
    with pytest.raises(TypeError, match="lr_lambda must be callable"):
        lr_scheduler.LambdaLR(opt, 0.5)
    a = lr_scheduler.StepLR(opt, step_size=1)
    with pytest.raises(ValueError, match="expects at least one scheduler"):
        lr_scheduler.SequentialLR(opt, [], milestones=[])
    with pytest.raises(ValueError, match="needs one milestone fewer than schedulers, got 1 schedulers and 1"):
        lr_scheduler.SequentialLR(opt, [a], milestones=[3])
    with pytest.raises(ValueError, match=r"milestones must be increasing positive epochs, got \[3, 3\]"):
        lr_scheduler.SequentialLR(opt, [a, a, a], milestones=[3, 3])
    other = lr_scheduler.StepLR(make_opt(), step_size=1)
    with pytest.raises(ValueError, match=r"schedulers\[1\] \(StepLR\) belongs to another optimizer"):
        lr_scheduler.SequentialLR(opt, [a, other], milestones=[2])
    with pytest.raises(TypeError, match=r"schedulers\[0\] is a int, not a scheduler"):
        lr_scheduler.SequentialLR(opt, [1], milestones=[])
