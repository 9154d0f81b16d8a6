"""nt.save / nt.load and the file system: what is not a regular file, temporaries of killed saves,
permission bits, symlinks."""

import os
import re
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.serialization import load, save

posix = pytest.mark.skipif(os.name != "posix", reason="FIFOs, signals and flock are POSIX")

_DEAD_PID = 2**31 - 1  # above Linux's largest pid_max (2**22): no process has it


def _expect_bad(p, fragment):
    with pytest.raises(ValueError, match=re.escape(repr(str(p))) + " is not a valid checkpoint: .*" + fragment):
        load(p)


def _temporaries(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".tmp"))


# ----------------------------------------------------------------------------- what load refuses to open


@posix
def test_load_of_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "c.safetensors"
    os.mkfifo(fifo)
    outcome = []

    def attempt():
        try:
            load(fifo)
        except ValueError as e:
            outcome.append(e)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=60)  # a guard against a hang, not a timing: the refusal needs no writer
    if thread.is_alive():  # blocked opening the FIFO: give it a writer so that the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=60)
    assert len(outcome) == 1, "load blocked on a FIFO instead of refusing it"
    assert re.search(re.escape(repr(str(fifo))) + " is not a valid checkpoint: it is a FIFO, not a regular file",
                     str(outcome[0]))


@posix
def test_load_of_a_directory_or_device_is_refused(tmp_path):
    _expect_bad(tmp_path, "it is a directory, not a regular file")
    _expect_bad("/dev/null", "it is a character device, not a regular file")


def test_load_follows_a_symlink_to_a_regular_file(tmp_path):
    save({"w": nt.ones(2, names=("x",))}, tmp_path / "c.safetensors")
    os.symlink("c.safetensors", tmp_path / "link.safetensors")
    assert load(tmp_path / "link.safetensors")["w"].names == ("x",)


# ----------------------------------------------------------------------------- temporaries of killed saves

# A child that saves a large tensor and stops for good once the temporary is written, before the
# rename: the parent then sees a save in progress, and kills it there.
_PAUSED_SAVE = """
import os, sys, time
import namedtensor as nt

def pause(fd):
    print("paused", flush=True)
    time.sleep(3600)

os.fsync = pause
nt.save({"w": nt.zeros(1_000_000)}, sys.argv[1])
"""


@posix
def test_a_save_killed_mid_write_leaves_a_temporary_the_next_save_removes(tmp_path):
    p = tmp_path / "c.safetensors"
    save({"w": nt.arange(3.0)}, p)
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_SAVE, str(p)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "paused\n"
        (tmp,) = _temporaries(tmp_path)
        assert os.path.getsize(tmp_path / tmp) > 4_000_000
        save({"w": nt.arange(4.0)}, p)  # the child is alive: its temporary is a save in progress
        assert _temporaries(tmp_path) == [tmp]
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    np.testing.assert_array_equal(load(p)["w"].numpy(), np.arange(4.0))  # the killed save changed nothing
    save({"w": nt.arange(5.0)}, p)
    assert os.listdir(tmp_path) == ["c.safetensors"]
    np.testing.assert_array_equal(load(p)["w"].numpy(), np.arange(5.0))


@posix
@pytest.mark.parametrize(
    "pid, size, removed",
    [
        (_DEAD_PID, 100, True),  # written by a process that is gone
        (_DEAD_PID, 0, True),  # created by a process that is gone, before it wrote anything
        ("parent", 100, True),  # written and not locked: its save died and the pid was reused
        ("parent", 0, False),  # empty and its process lives: a save that has not locked it yet
        ("self", 100, False),  # a save of this process, in another thread
    ],
)
def test_which_temporaries_are_stale(tmp_path, pid, size, removed):
    pid = {"parent": os.getppid(), "self": os.getpid()}.get(pid, pid)
    tmp = tmp_path / f".c.safetensors.{pid}.0123abcd.tmp"
    tmp.write_bytes(b"x" * size)
    others = [".c.safetensors.0123abcd.tmp", f".d.safetensors.{_DEAD_PID}.0123abcd.tmp",
              f"c.safetensors.{_DEAD_PID}.0123abcd.tmp", f".c.safetensors.{_DEAD_PID}.0123abcd.tmp.bak"]
    for name in others:  # not temporaries of this target, or not ours
        (tmp_path / name).write_bytes(b"y")
    save({"w": nt.ones(1)}, tmp_path / "c.safetensors")
    assert tmp.exists() is not removed
    assert all((tmp_path / name).exists() for name in others)


@posix
def test_a_stale_temporary_that_is_a_fifo_does_not_block_a_save(tmp_path):
    os.mkfifo(tmp_path / f".c.safetensors.{_DEAD_PID}.0123abcd.tmp")
    save({"w": nt.ones(1)}, tmp_path / "c.safetensors")
    assert (tmp_path / "c.safetensors").exists()


# ----------------------------------------------------------------------------- what the user set


@posix
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_saving_over_a_file_keeps_its_permission_bits(tmp_path, mode):
    p = tmp_path / "c.safetensors"
    save({"w": nt.ones(2)}, p)
    os.chmod(p, mode)
    save({"w": nt.zeros(3)}, p)
    assert stat.S_IMODE(os.stat(p).st_mode) == mode
    np.testing.assert_array_equal(load(p)["w"].numpy(), np.zeros(3))


@posix
def test_a_new_file_gets_the_umask_default(tmp_path):
    umask = os.umask(0o027)
    try:
        save({"w": nt.ones(2)}, tmp_path / "c.safetensors")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "c.safetensors").st_mode) == 0o640


def test_saving_to_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "latest").mkdir()
    target = tmp_path / "runs" / "step100.safetensors"
    link = tmp_path / "latest" / "ckpt.safetensors"
    save({"w": nt.ones(2)}, target)
    os.symlink(os.path.join("..", "runs", "step100.safetensors"), link)
    save({"w": nt.zeros(3, names=("x",))}, link)
    assert os.path.islink(link) and os.readlink(link) == os.path.join("..", "runs", "step100.safetensors")
    assert load(target)["w"].names == ("x",)
    assert os.listdir(tmp_path / "runs") == ["step100.safetensors"] and os.listdir(tmp_path / "latest") == [
        "ckpt.safetensors"]


def test_saving_to_a_dangling_symlink_creates_its_target(tmp_path):
    os.symlink("new.safetensors", tmp_path / "link.safetensors")
    save({"w": nt.ones(2)}, tmp_path / "link.safetensors")
    assert os.path.islink(tmp_path / "link.safetensors")
    assert load(tmp_path / "new.safetensors")["w"].shape == (2,)
