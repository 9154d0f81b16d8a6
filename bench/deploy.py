"""The demo's model deployed: namedtensor eager float32 against ONNX Runtime float32 and int8 (dynamic and
static quantization), side by side in this process.

The model is trained by the demo's own code (``python -m namedtensor.demo``'s training, ``--steps``
steps, its checkpoint), then:

* ``eager``: namedtensor, float32, the model itself;
* ``ORT float32``: ``nt.onnx.export(model, ...)`` run by ONNX Runtime;
* ``ORT int8 dynamic``: ``nt.quantization.quantize_dynamic(model)`` exported (QDQ form, the input
  quantized by DynamicQuantizeLinear);
* ``ORT int8 static``: ``prepare`` -> 20 calibration batches of the training data -> ``convert``,
  exported in QDQ form.

For each: the held-out token accuracy (the demo's measure: next-token predictions on the answer
positions, the true prefix given, 1000 problems none of which is in the training set), the model
file's size, the median latency of one sequence (batch 1) and the throughput at batch 64 (sequences
per second), the runs of the columns interleaved in shuffled rounds.  Every ONNX model is one export
with dynamic batch and sequence dims.

    pip install onnx onnxruntime
    python bench/deploy.py [--steps 400] [--threads 1] [--rounds 30]

OpenBLAS tuning variables that this workplace sets for old CPUs slow NumPy down; they are removed here,
in this script's own environment only.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

from own_env import run_in_own_environment


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400, help="the demo's training steps (default 400, the demo's)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=30)
    return p.parse_args()


ARGS = _parse()
run_in_own_environment(ARGS.threads)

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import namedtensor as nt  # noqa: E402
from namedtensor import demo  # noqa: E402
from namedtensor.quantization import convert, prepare, quantize_dynamic  # noqa: E402


def trained_model(out: str) -> demo.SortingTransformer:
    """The demo run as its command line runs it; its checkpoint loaded back."""
    demo.main(["--steps", str(ARGS.steps), "--out", out, "--no-progress"])
    checkpoint = nt.load(os.path.join(out, demo.CHECKPOINT))
    model = demo.SortingTransformer(**checkpoint["config"]["model"])
    model.load_state_dict(checkpoint["model"])
    model.eval()
    return model


def data(seed: int = 0):
    """The demo's training and held-out sets (seeds as the demo draws them)."""
    train_x, _ = demo.make_task(16384, seed=3 * seed + 1)
    test_x, test_y = demo.make_task(1000, seed=3 * seed + 2, exclude=train_x)
    return train_x.rename(example="batch"), test_x.rename(example="batch"), test_y.rename(example="batch")


def session(model, path: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = ARGS.threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def accuracy(logits: np.ndarray, targets: np.ndarray) -> float:
    scored = targets != demo.IGNORE
    return float(((logits.argmax(-1) == targets) & scored).sum() / scored.sum())


def interleaved(fns: dict, rounds: int) -> dict:
    times = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        order = list(fns)
        random.shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    nt.set_num_threads(ARGS.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = trained_model(tmp)
        train_x, test_x, test_y = data()
        spec = nt.spec({"batch": 2, "seq": demo.SEQ_LEN}, dtype=nt.int64)

        prepared = prepare(model)
        with nt.no_grad():
            for k in range(20):
                prepared(train_x[{"batch": slice(64 * k, 64 * (k + 1))}])
        variants = {"ORT float32": model, "ORT int8 dynamic": quantize_dynamic(model),
                    "ORT int8 static": convert(prepared)}
        sessions, sizes = {}, {}
        for name, m in variants.items():
            path = os.path.join(tmp, name.replace(" ", "_") + ".onnx")
            nt.onnx.export(m, spec, path=path)
            sizes[name] = os.path.getsize(path)
            sessions[name] = session(m, path)

        one = test_x[{"batch": slice(0, 1)}]
        many = test_x[{"batch": slice(0, 64)}]

        def runs(x: nt.Tensor) -> dict:
            fns = {"eager": lambda: model(x)}
            for name, s in sessions.items():
                fns[name] = (lambda s, a: lambda: s.run(None, {"tokens": a}))(s, x.numpy())
            return fns

        with nt.no_grad():
            acc = {"eager": accuracy(model(test_x).numpy(), test_y.numpy())}
            for name, s in sessions.items():
                acc[name] = accuracy(s.run(None, {"tokens": test_x.numpy()})[0], test_y.numpy())
            latency = interleaved(runs(one), ARGS.rounds)
            batch = interleaved(runs(many), ARGS.rounds)

    float_size = sizes["ORT float32"]
    print(f"\nthe demo's model ({ARGS.steps} training steps), {ARGS.threads} thread(s); ONNX Runtime {ort.__version__}")
    print("| run | held-out token accuracy | model file | latency, batch 1 (ms) | throughput, batch 64 (seq/s) |")
    print("|---|---|---|---|---|")
    for name in ("eager", *sessions):
        size = "-" if name == "eager" else f"{sizes[name] / 1024:.0f} KiB ({sizes[name] / float_size:.4f}x)"
        print(f"| {name} | {acc[name]:.4f} | {size} | {latency[name] * 1e3:.3f} | {64 / batch[name]:,.0f} |")


if __name__ == "__main__":
    main()
