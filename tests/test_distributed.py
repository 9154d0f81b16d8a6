"""Data-parallel training and collectives over MPI.

The MPI checks run as 2 ranks in one launch of ``mpiexec -n 2 python tests/mpi/checks.py`` (MPI
starts slowly), under a timeout so that a hang fails instead of blocking; each test asserts on
part of what the ranks report.  2-rank DDP training is compared with one process training on the
combined batches (``tests/mpi/ddp_setup.py`` builds both).  They need mpi4py and an ``mpiexec``
(``pip install mpi4py mpich``, in the ``test`` extra) and are skipped, saying so, without them.
MPICH's ``mpiexec`` runs 2 ranks on any number of cores; Open MPI's gets ``--oversubscribe`` and
its permission to run as root (containers and CI run as root).  MPI needs no other setting in a
container: MPICH's ranks on one machine talk through shared memory.  The rest needs no MPI.
"""

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import namedtensor as nt
import namedtensor.distributed as dist
from namedtensor.data import DataLoader, TensorDataset
from namedtensor.distributed import DistributedSampler, _nccl
from namedtensor.testing import assert_close

MPI_DIR = Path(__file__).parent / "mpi"
sys.path.insert(0, str(MPI_DIR))
import ddp_setup as S  # noqa: E402

TIMEOUT = 120  # seconds for the whole launch; it takes about 3


def _mpiexec():
    """The ``mpiexec`` beside this Python (a virtual environment with the mpich wheel), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()
needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpi4py and mpiexec: pip install mpi4py mpich (in the test extra)")


def _launch_command(n: int, *args: str):
    cmd = [MPIEXEC, "-n", str(n)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(MPI_DIR), os.environ.get("PYTHONPATH", "")]))
    version = subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True, timeout=30).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        cmd.append("--oversubscribe")
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return cmd + [sys.executable, *args], env


def run_ranks(n: int, *args: str) -> subprocess.CompletedProcess:
    """Run ``python *args`` on ``n`` ranks; a launch past TIMEOUT is killed (all its processes) and fails."""
    cmd, env = _launch_command(n, *args)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # mpiexec and the ranks it started: their own session
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} hung (killed after {TIMEOUT} s)\nstdout:\n{out}\nstderr:\n{err}")
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode})\nstdout:\n{out}\nstderr:\n{err}"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of the 2 ranks of tests/mpi/checks.py reported, by rank, and rank 0's trained parameters."""
    folder = tmp_path_factory.mktemp("ddp")
    done = run_ranks(2, str(MPI_DIR / "checks.py"), str(folder))
    found = sorted(p.name for p in folder.iterdir())
    assert found == ["params.safetensors", "rank0.json", "rank1.json"], (found, done.stdout, done.stderr)
    r0, r1 = (json.loads((folder / f"rank{r}.json").read_text()) for r in (0, 1))
    return r0, r1, nt.load(folder / "params.safetensors")


def both(ranks, key):
    r0, r1, _ = ranks
    assert r0[key] == r1[key], (key, r0[key], r1[key])
    return r0[key]


# ----------------------------------------------------------------------------- DDP


@needs_mpi
def test_two_ranks_train_like_one_process_on_the_combined_batches(ranks):
    r0, _, trained = ranks
    assert (r0["world"], r0["backend"]) == (2, "mpi")
    assert both(ranks, "same_start")  # rank 1 started from other weights: DDP broadcast rank 0's
    assert both(ranks, "same_after")
    nt.manual_seed(100)  # rank 0's initial weights
    reference = S.Net()
    S.train(reference, S.loaders(S.dataset(), [0, 1]))  # one process: both ranks' batches at once
    assert sorted(trained) == sorted(reference.state_dict()) == both(ranks, "state_dict_keys")
    for key, value in reference.state_dict().items():
        assert trained[key].names == value.names
        assert_close(trained[key], value.numpy(), atol=1e-12, rtol=1e-10)
    assert both(ranks, "names_kept")
    assert both(ranks, "spare_grad_none")  # no rank used it: its gradient stays None everywhere


@needs_mpi
def test_buckets_in_reverse_registration_order_start_during_backward(ranks):
    # 300-byte buckets: fc2's and fc1.bias's gradients, fc1.weight's, then the unused parameter's
    assert both(ranks, "buckets") == [["fc1.bias", "fc2.weight", "fc2.bias"], ["fc1.weight"], ["spare"]]
    # when backward finishes fc1, the first two buckets' all-reduces have started (overlap), and none
    # has with overlap=False; the unused parameter's bucket waits for the end of backward
    assert both(ranks, "started_in_backward_overlap_True") == [2, 3]
    assert both(ranks, "started_in_backward_overlap_False") == [0, 3]


@needs_mpi
def test_dropping_the_wrapper_removes_its_hooks(ranks):
    assert both(ranks, "hooks_before_after_drop") == [1, 0]


@needs_mpi
def test_no_sync_accumulation_equals_the_unaccumulated_gradient(ranks):
    assert both(ranks, "no_sync_stays_local")  # inside no_sync the ranks' gradients differ
    r0, r1, _ = ranks
    assert r0["no_sync_max_diff"] < 1e-12 and r1["no_sync_max_diff"] < 1e-12
    assert both(ranks, "no_sync_none_same")


@needs_mpi
def test_a_parameter_only_one_rank_uses_gets_the_mean_gradient(ranks):
    # rank 1's gradient is -2 per element, rank 0 has none (counted as 0): the mean is -1 on both
    assert both(ranks, "spare_grad_rank1_only") == [["spare"], [-1.0, -1.0]]


@needs_mpi
def test_models_that_differ_fail_on_every_rank_without_hanging(ranks):
    shape = both(ranks, "err_model_shape")
    assert shape.startswith("ValueError: DistributedDataParallel: the ranks' models differ")
    assert ("parameter 'fc1.weight': rank 0 has names ('hidden', 'feat'), shape (8, 5), float64; rank 1 has "
            "names ('hidden', 'feat'), shape (9, 5), float64") in shape
    assert "Every rank must build the same model" in shape
    names = both(ranks, "err_model_names")
    assert ("parameter 'weight': rank 0 has names ('b', 'a'), shape (2, 2), float32; rank 1 has names "
            "('a', 'b')") in names
    assert both(ranks, "alive")  # and every rank went on to the barrier after


@needs_mpi
def test_the_demo_trains_data_parallel(tmp_path):
    done = run_ranks(2, "-m", "namedtensor.demo", "--distributed", "--steps", "4", "--no-progress",
                     "--out", str(tmp_path))
    out = done.stdout
    assert out.count("data-parallel on 2 processes (mpi): each trains on 1/2 of every batch") == 1
    assert out.count("reloaded checkpoint: outputs identical") == 1  # rank 0 alone prints and saves
    assert re.search(r"trained 4 steps in [\d.]+s: loss [\d.]+ -> [\d.]+", out), out
    assert nt.load(tmp_path / "sorter.safetensors")["step"] == 4


# ----------------------------------------------------------------------------- collectives


@needs_mpi
def test_collectives_keep_names(ranks):
    x0 = np.arange(6.0).reshape(2, 3)  # rank r holds x0 + 10 r, names ("a", "b")
    x1 = x0 + 10
    ab = ["a", "b"]
    assert both(ranks, "all_reduce_sum") == [ab, (x0 + x1).tolist(), True]  # in place: returns its tensor
    assert both(ranks, "all_reduce_mean") == [ab, ((x0 + x1) / 2).tolist(), True]
    assert both(ranks, "all_reduce_max") == [ab, x1.tolist(), True]
    assert both(ranks, "all_reduce_min") == [ab, x0.tolist(), True]
    assert both(ranks, "broadcast") == [ab, x1.tolist()]
    assert both(ranks, "all_gather") == [["rank", "a", "b"], [x0.tolist(), x1.tolist()]]
    assert both(ranks, "all_gather_pos") == [["a", None, "b"], np.stack([x0, x1], 1).tolist()]
    assert both(ranks, "bool_any") == [["k"], [True, True, False]]
    r0, r1, _ = ranks
    z = np.arange(8.0).reshape(2, 4)  # rank r holds z (r + 1): the sum is 3 z
    assert r0["reduce_scatter"] == [ab, (3 * z[:, :2]).tolist()]
    assert r1["reduce_scatter"] == [ab, (3 * z[:, 2:]).tolist()]
    assert r0["reduce_scatter_a_mean"] == [ab, (1.5 * z[:1]).tolist()]
    assert r1["reduce_scatter_a_mean"] == [ab, (1.5 * z[1:]).tolist()]


@needs_mpi
def test_collectives_without_blocking(ranks):
    x0 = np.arange(6.0).reshape(2, 3)
    assert both(ranks, "async_type") == "Work"
    assert both(ranks, "async_mean") == [["a", "b"], (x0 + 5).tolist(), True]
    assert both(ranks, "async_gather") == [["rank", "a", "b"], [x0.tolist(), (x0 + 10).tolist()]]
    assert both(ranks, "broadcast_async") == [["a", "b"], x0.tolist()]
    r0, r1, _ = ranks
    z = np.arange(8.0).reshape(2, 4)
    assert r0["reduce_scatter_async"] == [["a", "b"], (2 * z[:, :2]).tolist()]  # max: rank 1's, 2 z
    assert r1["reduce_scatter_async"] == [["a", "b"], (2 * z[:, 2:]).tolist()]


@needs_mpi
def test_collectives_on_the_strict_backend(ranks):
    x0 = np.arange(6.0).reshape(2, 3)
    assert both(ranks, "strict_sum") == [["a", "b"], (2 * x0 + 10).tolist()]
    assert both(ranks, "strict_gather") == [["rank", "b"], [x0[0].tolist(), (x0[0] + 10).tolist()]]


@needs_mpi
def test_ranks_that_disagree_get_the_same_error(ranks):
    assert both(ranks, "err_names").startswith(
        "NamesError: all_reduce: the ranks passed different tensors or arguments: rank 0: names ('a', 'b'), "
        "shape (2, 3), float64, op='sum'; rank 1: names ('b', 'a')")
    assert both(ranks, "err_shape").startswith("ValueError: all_gather: the ranks passed different tensors")
    assert "rank 0: names ('a', 'b'), shape (2, 2)" in both(ranks, "err_shape")
    assert "op='max'; rank 1: names ('a', 'b'), shape (2, 3), float64, op='sum'" in both(ranks, "err_op")
    nccl = both(ranks, "nccl_error")
    assert nccl.startswith("RuntimeError: init_process_group(backend='nccl'): 1 of 2 ranks cannot use NCCL. "
                           "rank 1: backend 'nccl' needs CuPy")
    assert both(ranks, "initialized_after_failed_init") is False


@needs_mpi
def test_collective_argument_errors(ranks):
    assert "has size 3, which 2 ranks cannot split evenly" in both(ranks, "err_uneven")
    assert both(ranks, "err_new_dim") == ("NamesError: all_gather: the new dim name 'a' is already a dim of "
                                          "('a', 'b'); choose another name.")
    assert both(ranks, "err_mean_int").startswith("TypeError: all_reduce: op='mean' needs a floating tensor")
    assert both(ranks, "err_requires_grad").startswith("RuntimeError: all_reduce: in-place edit of a tensor that "
                                                       "requires grad")


# ----------------------------------------------------------------------------- without MPI


def test_without_mpi4py_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    with pytest.raises(ImportError, match=r"init_process_group: namedtensor.distributed runs on MPI through "
                                          r"mpi4py, which is not installed .*pip install mpi4py mpich"):
        dist.init_process_group()
    assert not dist.is_initialized()


def test_the_demo_without_mpi4py_is_a_usage_error(monkeypatch, capsys, tmp_path):
    from namedtensor import demo

    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    with pytest.raises(SystemExit) as exc:
        demo.main(["--distributed", "--steps", "1", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--distributed: init_process_group: namedtensor.distributed runs on MPI" in capsys.readouterr().err


def test_without_a_process_group():
    for fn in (dist.get_rank, dist.get_world_size, dist.barrier, dist.destroy_process_group):
        with pytest.raises(RuntimeError, match=r"no process group; call nt.distributed.init_process_group\(\) "
                                               r"first \(and start the processes with: mpiexec -n N"):
            fn()
    with pytest.raises(RuntimeError, match="all_reduce: no process group"):
        dist.all_reduce(nt.zeros(2))
    with pytest.raises(RuntimeError, match="DistributedDataParallel: no process group"):
        dist.DistributedDataParallel(nt.nn.Linear("a", "b", 2, 2))
    with pytest.raises(RuntimeError, match="DistributedSampler: no process group"):
        DistributedSampler(list(range(4)))
    with pytest.raises(ValueError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")


def test_nccl_without_cupy_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(RuntimeError, match=r"backend 'nccl' needs CuPy with NCCL and an NVIDIA GPU per process "
                                           r"\(pip install cupy-cuda12x nvidia-nccl-cu12\); without GPUs use "
                                           r"backend='mpi'"):
        _nccl.prepare(0)


def test_distributed_sampler_shares():
    data = list(range(10))
    shares = [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]  # padded with the first indices
    dropped = [list(DistributedSampler(data, 3, r, shuffle=False, drop_last=True)) for r in range(3)]
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    samplers = [DistributedSampler(data, 2, r, seed=5) for r in range(2)]
    first = [list(s) for s in samplers]
    assert sorted(first[0] + first[1]) == data and len(samplers[0]) == 5
    assert [list(s) for s in samplers] == first  # the same order until the epoch changes
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert sorted(second[0] + second[1]) == data and second != first
    assert DistributedSampler(data, 2, 0, seed=5).__iter__().__next__() == first[0][0]


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match="rank must be from 0 to 1, got 2"):
        DistributedSampler([1, 2], num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be at least 1"):
        DistributedSampler([1, 2], num_replicas=0, rank=0)
    with pytest.raises(TypeError, match="rank must be an int"):
        DistributedSampler([1, 2], num_replicas=2, rank=1.0)
    with pytest.raises(ValueError, match="1 samples cannot give each of 2 ranks one"):
        DistributedSampler([1], num_replicas=2, rank=0, drop_last=True)


def test_data_loader_with_a_sampler():
    ds = TensorDataset(nt.tensor(np.arange(10.0), names=("example",)), dim="example")
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    assert len(loader) == 3
    batches = [b[0] for b in loader]
    assert [b.names for b in batches] == [("batch",)] * 3
    assert [b.numpy().tolist() for b in batches] == [[1.0, 3.0], [5.0, 7.0], [9.0]]
    assert len(DataLoader(ds, batch_size=2, sampler=sampler, drop_last=True)) == 2
    with pytest.raises(ValueError, match="give shuffle=True or a sampler, not both"):
        DataLoader(ds, sampler=sampler, shuffle=True)
    with pytest.raises(TypeError, match="sampler must be an iterable of indices with a length, got a int"):
        DataLoader(ds, sampler=3)
