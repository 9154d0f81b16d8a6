"""Run under ``mpiexec``: one way for a rank to fail, which must end the whole job with a non-zero
status and a message instead of leaving the other ranks waiting.

``python failures.py SCENARIO TIMEOUT``: TIMEOUT is the group's collective timeout in seconds.
tests/test_distributed.py launches each scenario and checks the status and the messages; where a
scenario must end without the timeout's help, it gives a timeout far beyond its launch's limit.
"""

import datetime
import sys
import time

import ddp_setup as S
import namedtensor as nt
import namedtensor.distributed as dist

scenario, seconds = sys.argv[1], float(sys.argv[2])
# one scenario gives the timeout as PyTorch does, a timedelta; the others as a number of seconds
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=seconds) if scenario == "alone" else seconds)
rank = dist.get_rank()


def fail(step: int) -> None:
    """What rank 1 does at step 2 of the training scenarios, between its forward and its backward."""
    if scenario in ("raise", "skip"):
        raise ValueError(f"boom on rank {rank} at step {step}")
    if scenario == "exit_3":
        sys.exit(3)
    if scenario == "exit_none":
        sys.exit()


def train(steps: int, broadcast_buffers: bool = True) -> None:
    """DDP training of ddp_setup's model on this rank's batches; rank 1 calls ``fail`` at step 2,
    and in scenario "skip" catches its error and goes on to the next step."""
    nt.manual_seed(0)
    model = dist.DistributedDataParallel(S.Net(), broadcast_buffers=broadcast_buffers)
    opt = nt.optim.SGD(model.parameters(), lr=S.LR)
    batches = list(S.loaders(S.dataset(), [rank])[0])
    for step in range(1, steps + 1):
        x, y = batches[(step - 1) % len(batches)]
        loss = S.loss_fn(model, x, y)
        if rank == 1 and step == 2:
            try:
                fail(step)
            except ValueError:
                if scenario != "skip":
                    raise
                continue
        opt.zero_grad()
        loss.backward()
        opt.step()


if scenario in ("raise", "exit_3", "exit_none"):
    train(3)
elif scenario == "skip":
    train(3, broadcast_buffers=False)  # a buffer broadcast would mismatch the skipped step's all-reduce
elif scenario == "extra_step":
    train(3 + rank)  # rank 1 runs one step more; rank 0 ends its script with the group still up
elif scenario == "alone":
    if rank == 0:
        dist.all_reduce(nt.ones(3, names=("k",)))  # a collective that rank 1 never makes
    dist.destroy_process_group()
elif scenario == "missing":
    if rank == 2:
        time.sleep(600)  # busy elsewhere: the abort of the job must end it
    dist.all_reduce(nt.ones(3, names=("k",)), check=False)
print(f"rank {rank}: the end of the script", flush=True)
