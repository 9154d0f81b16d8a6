"""Data-parallel training and collectives over MPI.

The MPI checks run as 2 ranks in one launch of ``mpiexec -n 2 python tests/mpi/checks.py`` (MPI
starts slowly), under a timeout so that a hang fails instead of blocking; each test asserts on
part of what the ranks report.  2-rank DDP training is compared with one process training on the
combined batches (``tests/mpi/ddp_setup.py`` builds both).  They need mpi4py and an ``mpiexec``
(``pip install mpi4py mpich``, in the ``test`` extra) and are skipped, saying so, without them.
Each way for a rank to fail (``tests/mpi/failures.py``: an uncaught exception, ``sys.exit``, one step
more, a collective made alone, a skipped step) is a launch of its own that must end with a non-zero
status and a message within seconds.  MPICH's ``mpiexec`` runs 2 ranks on any number of cores; Open
MPI's gets ``--oversubscribe`` and its permission to run as root (containers and CI run as root).  MPI needs no other setting in a
container: MPICH's ranks on one machine talk through shared memory.  The rest needs no MPI.
"""

import datetime
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
from namedtensor.distributed import DistributedSampler, _nccl, _watch, ddp
from namedtensor.distributed._transport import MpiTransport
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


def launch(n: int, *args: str, limit: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``python *args`` on ``n`` ranks; a launch past ``limit`` seconds is killed (all its processes) and fails."""
    cmd, env = _launch_command(n, *args)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # mpiexec and the ranks it started: their own session
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} hung (killed after {limit} s)\nstdout:\n{out}\nstderr:\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_ranks(n: int, *args: str) -> subprocess.CompletedProcess:
    """``launch``, which must succeed."""
    done = launch(n, *args)
    assert done.returncode == 0, (f"{' '.join(done.args)} failed ({done.returncode})\nstdout:\n{done.stdout}\n"
                                  f"stderr:\n{done.stderr}")
    return done


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
def test_a_compiled_module_trains_data_parallel_as_the_eager_one(ranks):
    assert both(ranks, "compiled_warnings") == []
    assert max(both(ranks, "compiled_max_diff"), 0.0) <= 1e-12
    # the wrapper compiled: eager from its first call on (it counts steps), the same training
    warnings = both(ranks, "compiled_wrapper_warnings")
    assert len(warnings) == 1 and "runs eagerly from now on: a value read from outside" in warnings[0]
    assert both(ranks, "compiled_wrapper_max_diff") == 0.0


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


# ----------------------------------------------------------------------------- a failing rank ends the job
# Each scenario of tests/mpi/failures.py must end the job with a non-zero status and a message well
# within FAILURE_LIMIT: it takes a few seconds.  NEVER is a collective timeout far beyond that limit,
# for the scenarios that something else than the timeout must end.
FAILURE_LIMIT = 60
NEVER = "600"


def failing(scenario: str, timeout: str, n: int = 2) -> str:
    """Launch a failure scenario, check that the job failed, and return its stderr."""
    done = launch(n, str(MPI_DIR / "failures.py"), scenario, timeout, limit=FAILURE_LIMIT)
    assert done.returncode != 0, (scenario, done.stdout, done.stderr)
    return done.stderr


@needs_mpi
def test_an_uncaught_exception_on_one_rank_aborts_the_job():
    err = failing("raise", NEVER)  # rank 1 raises between forward and backward; rank 0 waits in backward
    assert ("namedtensor.distributed: rank 1 of 2 raised ValueError, uncaught; aborting the job (MPI_Abort) "
            "so that no rank waits for it.\nTraceback (most recent call last):") in err, err
    assert "ValueError: boom on rank 1 at step 2" in err, err


@needs_mpi
@pytest.mark.parametrize("scenario", ["exit_3", "exit_none"])
def test_a_rank_that_exits_mid_step_ends_the_job(scenario):
    err = failing(scenario, NEVER)  # sys.exit(3) or sys.exit() on rank 1 between forward and backward
    assert "namedtensor.distributed: rank 0 of 2 raised RuntimeError" in err, err
    assert ("RuntimeError: DistributedDataParallel: all_reduce of gradient bucket 0 of 1 (step 2): rank 1 left the "
            "job (the process is exiting: sys.exit or the end of its script") in err, err
    assert "while rank 0 waits for it here" in err, err


@needs_mpi
def test_a_rank_that_runs_one_step_more_ends_the_job():
    err = failing("extra_step", NEVER)  # rank 0's script ends after 3 steps, rank 1 starts a 4th
    assert "RuntimeError: broadcast: rank 0 left the job" in err, err  # DDP's broadcast of buffers before forward
    assert "did it stop early, or run fewer steps?" in err, err


@needs_mpi
def test_a_collective_that_one_rank_makes_alone_times_out():
    err = failing("alone", "2")  # rank 1 left the group (destroy_process_group), rank 0 all-reduces
    # the timeout was given as datetime.timedelta(seconds=2)
    assert ("TimeoutError: all_reduce: timed out after 2 s on rank 0 of 2, in the group's collective #1: rank 1 did "
            "not arrive (no answer: busy elsewhere, stuck, or gone).") in err, err
    assert "give init_process_group(timeout=seconds) more time" in err, err


@needs_mpi
def test_the_timeout_says_which_ranks_arrived():
    err = failing("missing", "2", n=3)  # ranks 0 and 1 all-reduce, rank 2 is busy elsewhere
    assert re.search(r"TimeoutError: all_reduce: timed out after 2 s on rank ([01]) of 3, in the group's collective "
                     r"#1: rank 2 did not arrive \(no answer: busy elsewhere, stuck, or gone\); rank [01] waits here "
                     r"too\.", err), err


@needs_mpi
def test_a_rank_that_skips_a_step_is_not_averaged_with_another_step():
    err = failing("skip", NEVER)  # rank 1 catches an error after its forward of step 2 and goes on to step 3
    assert ("RuntimeError: DistributedDataParallel: the ranks are at different steps: rank 0 at step 2; rank 1 at "
            "step 3 (a step is a forward in training mode with grad enabled, outside no_sync). Averaging would mix "
            "gradients of different steps, so no .grad was written.") in err, err


def test_the_timeout_message_says_where_each_rank_is():
    answers = {1: ("all_reduce", 7), 2: ("broadcast", 6), 4: ("all_reduce", 7)}
    text = _watch.timeout_message("all_reduce", 7, 0, 6, 2.5, answers, {5: 6})
    assert text == ("all_reduce: timed out after 2.5 s on rank 0 of 6, in the group's collective #7: rank 3 did not "
                    "arrive (no answer: busy elsewhere, stuck, or gone); rank 2 waits in broadcast (the group's "
                    "collective #6); rank 5 has exited; ranks 1, 4 wait here too. A rank that caught an error and "
                    "skipped a collective, or ran one step more than the others, leaves them waiting; if a rank is "
                    "only slow (a long evaluation or checkpoint on one rank), give init_process_group(timeout=seconds) "
                    "more time.")
    assert _watch.left_message("barrier", 3, 1, {0: 2, 2: 2}).startswith(
        "barrier: ranks 0, 2 left the job (the process is exiting: sys.exit or the end of its script: rank 0 after 2 "
        "of the group's collectives; rank 2 after 2 of the group's collectives) while rank 1 waits")


def test_ranks_steps_are_read_back_exactly_across_the_float16_range():
    transport = MpiTransport(None, None)  # its buffers only: no MPI
    bucket = ddp._Bucket([nt.zeros(3, names=("k",), dtype=nt.float16, requires_grad=True)], transport, 3)
    assert bucket.modulus == 2048  # float16 holds every integer below it exactly
    mine = 5000
    bucket.flat[4:] = [mine % 2048, (mine + 1) % 2048, (mine - 2) % 2048]  # what the all-reduce leaves there
    assert bucket.steps(mine) == [5000, 5001, 4998]
    with pytest.raises(RuntimeError, match=r"the ranks are at different steps: rank 0 at step 5; ranks 1, 3 at step "
                                           r"6; rank 2 at step 4 \(a step is a forward"):
        ddp._check_steps([5, 6, 4, 6])
    ddp._check_steps([7, 7, 7])


def test_the_timeout_must_be_positive_seconds_or_a_timedelta():
    for bad in (0, -1.0, float("inf"), float("nan"), "10", True, datetime.timedelta(0)):
        with pytest.raises(ValueError, match=r"init_process_group: timeout must be a positive number of seconds or "
                                             r"a datetime.timedelta, got "):
            dist.init_process_group(timeout=bad)
    assert not dist.is_initialized()


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
