"""A tour of namedtensor: the three rules, then a small model trained with named dims.

    python -m namedtensor.demo [--steps N] [--seed S]

It shows a broadcasting bug that NumPy runs silently and namedtensor stops,
broadcasting by name with ``align_as``, lifting unnamed arrays with
``refine_names``, and then fits a softmax classifier on synthetic data whose
every tensor (data, weights, gradients) carries names, printing the loss and
accuracy as it learns.
"""

from __future__ import annotations

import argparse
import time

import namedtensor as nt


def rule_examples() -> None:
    print("== 1. Names ride along")
    x = nt.randn(4, 3, 5, names=("batch", "seq", "embed"))
    print("x.names                  ", x.names)
    print("x.sum('seq').names       ", x.sum("seq").names)
    print("x.softmax('embed').names ", x.softmax("embed").names)

    print("\n== 2. Broadcasting is positional and checked by name")
    images = nt.randn(2, 3, 4, names=("batch", "height", "width"))
    per_batch_scale = nt.rand(2, names=("batch",))
    try:
        images * per_batch_scale  # NumPy would silently scale along 'width' if the sizes matched
    except nt.NamesError as e:
        print("caught:", e)
    scaled = images * per_batch_scale.align_as(images)
    print("with align_as:", scaled.names, scaled.shape)

    print("\n== 3. Dims are addressed by name; unnamed data is lifted with refine_names")
    raw = nt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    t = raw.refine_names("row", "col")
    print("t.mean('col') =", t.mean("col").tolist(), "names", t.mean("col").names)
    print("t[{'col': 1}] =", t[{"col": 1}].tolist(), "names", t[{"col": 1}].names)


def make_data(centres, n: int):
    """Noisy points around one centre per class: named ('sample', 'feat') and ('sample',)."""
    classes, feats = centres.shape
    labels = nt.randint(0, classes, (n,), names=("sample",))
    noise = nt.randn(n, feats, names=("sample", "feat")) * 1.5
    # a named index replaces the dim it selects from: ('class', 'feat') -> ('sample', 'feat')
    points = centres.index_select("class", labels) + noise
    return points, labels


def train(steps: int, seed: int) -> float:
    nt.manual_seed(seed)
    feats, classes = 8, 4
    centres = nt.randn(classes, feats, names=("class", "feat"))
    x, y = make_data(centres, 512)
    x_test, y_test = make_data(centres, 512)
    w = (nt.randn(feats, classes, names=("feat", "class")) * 0.1).requires_grad_()
    b = nt.zeros(classes, names=("class",), requires_grad=True)
    lr = 0.5
    print(f"\n== Training a softmax classifier: x{x.names} {x.shape}, w{w.names} {w.shape}")
    start = time.perf_counter()
    for step in range(steps + 1):
        logits = nt.dot(x, w, over="feat") + b  # ('sample', 'class')
        logp = logits.log_softmax("class")
        loss = -nt.gather(logp, "class", y.align_to("sample", "class")).mean()
        w.grad = None
        b.grad = None
        loss.backward()
        with nt.no_grad():
            w.sub_(w.grad * lr)
            b.sub_(b.grad * lr)
        if step % max(1, steps // 5) == 0:
            acc = (logits.argmax("class") == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  train accuracy {acc:.3f}  grad names {w.grad.names}")
    with nt.no_grad():
        test_logits = nt.dot(x_test, w, over="feat") + b
    acc = (test_logits.argmax("class") == y_test).float().mean().item()
    print(f"trained {steps} steps in {time.perf_counter() - start:.2f}s; held-out accuracy {acc:.3f} "
          f"(chance {1 / classes:.2f})")
    return acc


def main(argv=None) -> float:
    """Run the tour; returns the classifier's held-out accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    nt.manual_seed(args.seed)
    rule_examples()
    return train(args.steps, args.seed)


if __name__ == "__main__":
    main()
