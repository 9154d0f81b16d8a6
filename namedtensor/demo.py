"""``python -m namedtensor.demo``: a small Transformer, written with named dims, learns to sort.

    python -m namedtensor.demo [--steps N] [--device cpu] [--seed S] [--out DIR] [--compile]
    mpiexec -n 2 python -m namedtensor.demo --distributed      # data-parallel (pip install mpi4py mpich)

The task ships with the code (nothing is downloaded): a causal Transformer language model reads
8 random digits and a separator, then must write the same digits in sorted order::

    3 1 4 1 5 9 2 6 |  1 1 2 3 4 5 6 9

Only the 8 answer tokens are scored (the prompt's targets are ``IGNORE`` in the cross-entropy);
chance is 10% per token.  Every tensor has named dims: tokens ``("batch", "seq")``, embeddings
``("batch", "seq", "embed")``, attention weights ``("batch", "head", "seq", "key")``, logits
``("batch", "seq", "vocab")``; the layers say which dim they read and write, and positions are
added to tokens by broadcasting ``("seq", "embed")`` against ``("batch", "seq", "embed")``.

The run trains with AdamW (linear warm-up, then cosine decay) on batches from a ``DataLoader``,
shows a progress bar with the loss, evaluates on held-out sequences that never occur in the
training set (token accuracy with the true prefix given, and whole answers sorted exactly by
greedy generation), prints examples, saves a checkpoint with ``nt.save``, reloads it into a
fresh model with ``nt.load`` and checks that the reloaded model gives identical outputs.
``--seed`` makes the whole run reproducible.

With ``--compile`` the model trains through ``nt.compile`` (its fused CPU kernels, and
``AdamW(fused=True)``, where Numba is installed: ``pip install -e '.[jit]'``): the same losses to
float rounding, in about 8 instead of 12 ms per training step on a CPU core.

With ``--distributed`` every process that ``mpiexec`` started trains the same model on its own
share of each batch (a ``DistributedSampler``; the global batch stays 64) under
``DistributedDataParallel``, which averages the gradients; rank 0 prints, evaluates and saves.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tqdm import tqdm

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import nn, optim
from namedtensor.data import DataLoader, TensorDataset

DIGITS = 8  # digits to sort
SEP = 10  # the separator token, after the digits 0-9
VOCAB = 11
SEQ_LEN = 2 * DIGITS  # the model reads the prompt and all but the last answer token
IGNORE = -100  # the target of a position that is not scored
CHECKPOINT = "sorter.safetensors"


def make_task(n: int, seed: int, exclude: Optional[nt.Tensor] = None,
              device: str = "cpu") -> Tuple[nt.Tensor, nt.Tensor]:
    """``n`` sorting problems drawn with ``seed``: ``(inputs, targets)``, both ``("example", "seq")``.

    ``inputs`` is ``digits | sorted[:-1]`` (16 tokens); ``targets`` is the next token at each
    position, ``IGNORE`` on the 8 prompt positions.  Problems whose digits occur in ``exclude``
    (another task's inputs) are dropped, so a held-out set can be disjoint from the training set.
    """
    nt.manual_seed(seed)
    digits = nt.randint(0, 10, (n, DIGITS), names=("example", "seq"), device=device)
    if exclude is not None:
        seen = {tuple(row) for row in exclude[{"seq": slice(0, DIGITS)}].tolist()}
        keep = [i for i, row in enumerate(digits.tolist()) if tuple(row) not in seen]
        digits = digits.index_select("example", nt.tensor(keep, dtype=nt.int64, device=device))
    answer = digits.sort("seq").values
    sep = nt.full((digits.shape[0], 1), SEP, names=("example", "seq"), dtype=nt.int64, device=device)
    inputs = nt.cat([digits, sep, answer[{"seq": slice(0, DIGITS - 1)}]], "seq")
    targets = nt.cat([nt.full(digits.shape, IGNORE, names=("example", "seq"), dtype=nt.int64, device=device),
                      answer], "seq")
    return inputs, targets


class SortingTransformer(nn.Module):
    """A causal Transformer LM over ``VOCAB`` tokens: ``("batch", "seq")`` -> ``("batch", "seq", "vocab")``.

    Token and learned position embeddings into ``"embed"`` (size ``size``), ``layers`` pre-norm
    blocks with ``heads`` heads and a 4x MLP, a final LayerNorm and a Linear ``"embed"`` -> ``"vocab"``.
    """

    def __init__(self, size: int = 64, heads: int = 4, layers: int = 2, vocab: int = VOCAB,
                 max_len: int = SEQ_LEN, device: Any = None) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, size, "embed", vocab_dim="vocab", device=device)  # ("vocab", "embed")
        self.pos = nn.Embedding(max_len, size, "embed", vocab_dim="position", device=device)  # ("position", "embed")
        self.blocks = nn.ModuleList([nn.TransformerBlock("embed", size, heads, device=device) for _ in range(layers)])
        self.norm = nn.LayerNorm("embed", size, device=device)
        self.head = nn.Linear("embed", "vocab", size, vocab, device=device)  # weight ("vocab", "embed")

    def embed(self, tokens: nt.Tensor) -> nt.Tensor:
        """Token plus position embeddings: ``("batch", "seq")`` -> ``("batch", "seq", "embed")``."""
        positions = nt.arange(tokens.size("seq"), names=("seq",), device=tokens.device)
        # ("batch", "seq", "embed") + ("seq", "embed"): broadcast from the right, names checked
        return self.tok(tokens) + self.pos(positions)

    def forward(self, tokens: nt.Tensor) -> nt.Tensor:
        """Next-token logits ``("batch", "seq", "vocab")``; position i sees tokens 0..i only."""
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h, is_causal=True)
        return self.head(self.norm(h))


def loss_fn(model: SortingTransformer, inputs: nt.Tensor, targets: nt.Tensor) -> nt.Tensor:
    """Mean cross-entropy over the answer positions (the prompt's targets are ``IGNORE``)."""
    return F.cross_entropy(model(inputs), targets, dim="vocab", ignore_index=IGNORE)


def generate(model: SortingTransformer, prompts: nt.Tensor) -> nt.Tensor:
    """Greedy answers ``("batch", "seq")`` (``DIGITS`` tokens) to prompts ``("batch", "seq")``
    (digits and separator), one token at a time."""
    tokens = prompts
    with nt.no_grad():
        for _ in range(DIGITS):
            last = model(tokens)[{"seq": -1}].argmax("vocab")  # ("batch",)
            tokens = nt.cat([tokens, last.align_to("batch", "seq")], "seq")
    return tokens[{"seq": slice(DIGITS + 1, None)}]


def evaluate(model: SortingTransformer, inputs: nt.Tensor, targets: nt.Tensor,
             sequences: bool = True) -> Dict[str, float]:
    """Accuracies on ``(inputs, targets)`` (``("example", "seq")``): ``token_accuracy`` of the
    next-token predictions on the answer positions (true prefix given) and, if ``sequences``,
    ``sequence_accuracy``: the fraction of answers that greedy generation gets exactly right."""
    was_training = model.training
    model.eval()
    inputs, targets = inputs.rename(example="batch"), targets.rename(example="batch")
    with nt.no_grad():
        scored = targets != IGNORE
        hits = (model(inputs).argmax("vocab") == targets) & scored
        result = {"token_accuracy": hits.sum().item() / scored.sum().item()}
        if sequences:
            answers = generate(model, inputs[{"seq": slice(0, DIGITS + 1)}])
            exact = (answers == targets[{"seq": slice(DIGITS, None)}]).all("seq")
            result["sequence_accuracy"] = exact.float().mean().item()
    model.train(was_training)
    return result


def train(model: SortingTransformer, loader: DataLoader, steps: int, *, lr: float = 3e-3,
          weight_decay: float = 0.01, warmup: int = 100, eval_every: int = 0,
          heldout: Optional[Tuple[nt.Tensor, nt.Tensor]] = None, progress: bool = True,
          fused: bool = False) -> Tuple[optim.AdamW, List[float], List[Dict[str, float]]]:
    """``steps`` AdamW steps on batches from ``loader`` (cycling through epochs): linear warm-up over
    ``warmup`` steps (at most a quarter of the run), then cosine decay to 0; gradients clipped to norm 1.
    Every ``eval_every`` steps (0: never) but the last, prints the token accuracy on ``heldout``.
    ``fused``: ``AdamW(fused=True)``.  Returns the optimizer, the loss of every step and those
    evaluations (dicts with ``step``)."""
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, fused=fused or None)
    warmup = max(1, min(warmup, steps // 4))
    sched = optim.lr_scheduler.SequentialLR(
        opt, [optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, total_iters=warmup),
              optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, steps - warmup))], milestones=[warmup])
    losses: List[float] = []
    evals: List[Dict[str, float]] = []
    batches = iter(())
    epoch = 0
    model.train()
    bar = tqdm(range(1, steps + 1), desc="training", unit="step", disable=not progress, dynamic_ncols=True)
    for step in bar:
        batch = next(batches, None)
        if batch is None:  # a new epoch: the loader reshuffles
            set_epoch = getattr(getattr(loader, "sampler", None), "set_epoch", None)
            if set_epoch is not None:  # a DistributedSampler: every rank draws the same new order
                set_epoch(epoch)
            epoch += 1
            batches = iter(loader)
            batch = next(batches)
        inputs, targets = batch  # ("batch", "seq") each
        loss = loss_fn(model, inputs, targets)
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        bar.set_postfix_str(f"loss {losses[-1]:.3f}", refresh=False)
        if heldout is not None and eval_every and step % eval_every == 0 and step < steps:
            evals.append({"step": step, **evaluate(model, *heldout, sequences=False)})
            msg = f"step {step:4d}  loss {losses[-1]:.3f}  held-out token accuracy {evals[-1]['token_accuracy']:.3f}"
            tqdm.write(msg)
    bar.close()
    return opt, losses, evals


def _fmt(tokens: Sequence[int]) -> str:
    return " ".join("|" if t == SEP else str(t) for t in tokens)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run the demo; returns the results: ``losses`` (every step), ``evals`` (the periodic ones),
    held-out ``token_accuracy`` and ``sequence_accuracy`` at the end, ``checkpoint`` (its path),
    ``reload_identical`` and ``seconds``."""
    parser = argparse.ArgumentParser(
        prog="python -m namedtensor.demo",
        description="A small causal Transformer, written with named dims, learns to sort digits.")
    parser.add_argument("--steps", type=int, default=400, help="training steps (default: 400)")
    parser.add_argument("--device", default="cpu", help="'cpu' (default), or 'cuda' / 'cuda:N' (needs CuPy)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data, the init and the shuffling (default: 0)")
    parser.add_argument("--out", default="namedtensor-demo", help="directory for the checkpoint (default: %(default)s)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel over the processes of mpiexec -n N (needs mpi4py and an MPI: "
                             "pip install mpi4py mpich)")
    parser.add_argument("--compile", action="store_true",
                        help="train through nt.compile (fused CPU kernels with the jit extra: pip install -e '.[jit]')")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.compile and args.distributed:
        parser.error("--compile with --distributed is not supported yet: DistributedDataParallel's hooks run in "
                     "its forward, which a compiled graph does not replay; use one of them.")
    try:
        probe = nt.zeros(1, device=args.device)  # an unknown or unavailable device fails here, with the library's message
    except (RuntimeError, ValueError) as e:
        parser.error(f"--device {args.device}: {e}")
    if probe.device == "meta":
        parser.error("--device meta: meta tensors have shapes but no data, so they cannot train; use 'cpu' or 'cuda'.")
    threads = nt.get_num_threads()
    # the matrices are small (64 wide): one thread beats handing them out to several, and on a busy
    # machine OpenBLAS's threads wait for each other (4-5x slower on 2 shared cores)
    nt.set_num_threads(1)
    if args.distributed:
        from . import distributed as dist

        try:
            dist.init_process_group("nccl" if args.device.startswith("cuda") else "mpi")
        except (ImportError, RuntimeError) as e:  # no mpi4py or MPI; no GPU for NCCL
            parser.error(f"--distributed: {e}")
    try:
        if args.distributed:
            return _run_distributed(args)
        return _run(args)
    finally:
        nt.set_num_threads(threads)


def _run_distributed(args: argparse.Namespace) -> Dict[str, Any]:
    """``_run`` on every rank of the process group (started by ``main``); only rank 0 prints,
    evaluates and saves."""
    import contextlib

    from . import distributed as dist

    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if rank == 0:
            print(f"data-parallel on {world} processes ({dist.get_backend()}): each trains on 1/{world} of every batch")
            return _run(args, rank, world)
        args.no_progress = True
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            return _run(args, rank, world)
    finally:
        dist.destroy_process_group()


def _run(args: argparse.Namespace, rank: int = 0, world: int = 1) -> Dict[str, Any]:
    start = time.perf_counter()

    # disjoint seeds for the training set, the held-out set and the init
    n_train, n_heldout, batch_size = 16384, 1000, 64
    train_x, train_y = make_task(n_train, seed=3 * args.seed + 1, device=args.device)
    test_x, test_y = make_task(n_heldout, seed=3 * args.seed + 2, exclude=train_x, device=args.device)
    train_set = TensorDataset(train_x, train_y, dim="example")
    if world == 1:
        loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, names="batch", seed=args.seed)
    else:  # each rank its share of every global batch of 64
        from .distributed import DistributedSampler

        loader = DataLoader(train_set, batch_size=batch_size // world, names="batch",
                            sampler=DistributedSampler(train_set, seed=args.seed, drop_last=True))
    nt.manual_seed(3 * args.seed)
    model_config = {"size": 64, "heads": 4, "layers": 2}
    model = SortingTransformer(**model_config, device=args.device)

    digits = test_x[{"example": 0, "seq": slice(0, DIGITS)}].tolist()
    print(f"Teaching a causal Transformer to sort {DIGITS} digits, e.g. {_fmt(digits + [SEP])} {_fmt(sorted(digits))}")
    print(f"  data: {n_train} training sequences, {test_x.size('example')} held-out ones (none seen in training); "
          f"loss on the {DIGITS} answer tokens only, chance 0.10 per token")
    print(f"  model: {len(model.blocks)} pre-norm blocks, 'embed' {model_config['size']}, {model_config['heads']} "
          f"heads, 'mlp' {4 * model_config['size']}; {sum(p.numel() for p in model.parameters()):,} parameters "
          f"on {args.device}")
    first = model.blocks[0]
    print(f"  parameters: tok.weight {model.tok.weight.names}, pos.weight {model.pos.weight.names}, "
          f"blocks.0.mlp.fc1.weight {first.mlp.fc1.weight.names}, head.weight {model.head.weight.names}")
    sample = train_x[{"example": slice(0, 2)}].rename(example="batch")
    with nt.no_grad():
        _, weights = first.attn(first.norm1(model.embed(sample)), is_causal=True, need_weights=True)
        logits = model(sample)
    print(f"  tokens {sample.names} {list(sample.shape)} -> attention weights {weights.names} "
          f"{list(weights.shape)} -> logits {logits.names} {list(logits.shape)}")

    trained = model
    fused = False
    if world > 1:
        from .distributed import DistributedDataParallel

        trained = DistributedDataParallel(model)
    elif args.compile:
        trained = nt.compile(model)
        fused = args.device == "cpu" and importlib.util.find_spec("numba") is not None
        print(f"  training through nt.compile{', with AdamW(fused=True)' if fused else ''}")
    opt, losses, evals = train(trained, loader, args.steps, eval_every=-(-args.steps // 4),
                               heldout=(test_x, test_y) if rank == 0 else None, progress=not args.no_progress,
                               fused=fused)
    if rank != 0:  # the same weights as rank 0's, which evaluates and saves them
        return {"losses": losses, "rank": rank, "seconds": time.perf_counter() - start}
    final = evaluate(model, test_x, test_y)
    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f}s: loss {losses[0]:.3f} -> "
          f"{losses[-1]:.3f}; held-out token accuracy {final['token_accuracy']:.3f}, whole sequences sorted "
          f"exactly {final['sequence_accuracy']:.3f}")
    model.eval()
    shown = test_x[{"example": slice(0, 3), "seq": slice(0, DIGITS + 1)}].rename(example="batch")
    for prompt, answer in zip(shown.tolist(), generate(model, shown).tolist()):
        mark = "ok" if answer == sorted(prompt[:DIGITS]) else "wrong"
        print(f"  {_fmt(prompt)} -> {_fmt(answer)}   {mark}")

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, CHECKPOINT)
    config = {"task": "sort digits", "digits": DIGITS, "model": model_config, "seed": args.seed,
              "batch_size": batch_size, "train_sequences": n_train, "heldout_sequences": test_x.size("example")}
    nt.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": args.steps, "config": config}, path)
    checkpoint = nt.load(path, device=args.device)
    fresh = SortingTransformer(**checkpoint["config"]["model"], device=args.device)
    fresh.load_state_dict(checkpoint["model"])
    fresh.eval()
    heldout = test_x.rename(example="batch")
    with nt.no_grad():
        identical = bool((fresh(heldout) == model(heldout)).all().item())
    if not identical:
        raise RuntimeError(f"the model reloaded from {path} gives other outputs than the trained one")
    print(f"saved {path}; reloaded checkpoint: outputs identical")
    return {"losses": losses, "evals": evals, "token_accuracy": final["token_accuracy"],
            "sequence_accuracy": final["sequence_accuracy"], "checkpoint": path, "reload_identical": identical,
            "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    main()
