"""``nt.retain_freed_memory`` and ``nt.compile``'s use of it: a step that allocates and frees the same
large arrays faults in fresh pages each time without it, and none with it.

Each case runs in its own process, since the setting is the whole process's (glibc's ``mallopt``), and
counts the page faults of repeated steps with ``getrusage``.
"""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import namedtensor as nt

ROOT = Path(__file__).resolve().parents[1]
GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

PRELUDE = """
import json, resource, sys, warnings
import numpy as np
import namedtensor as nt
from namedtensor.backends import heap

def step():  # four 8 MB arrays, then freed: 32 MB free at the heap's top, past glibc's own trim threshold
    arrays = [np.ones(2 << 20, np.float32) for _ in range(4)]
    del arrays

def faults():
    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5

def compile_something():
    f = nt.compile(lambda x: (x * 2.0).relu(), fuse=False)
    f(nt.ones(4, names=("i",)))
"""


def run(body: str, **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    environment.update(env)
    r = subprocess.run([sys.executable, "-c", PRELUDE + body], cwd=ROOT, env=environment, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


# a step of 32 MB faults in 8,192 pages when nothing is retained
MANY, FEW = 1000, 50

glibc_only = pytest.mark.skipif(not GLIBC, reason="retention is glibc's mallopt")


@glibc_only
def test_retention_stops_the_page_faults_of_repeated_steps():
    out = run("before = faults(); on = nt.retain_freed_memory(); print(json.dumps([before, on, faults()]))")
    before, on, after = out
    assert before > MANY
    assert on is True
    assert after < FEW


@glibc_only
def test_turning_retention_off_gives_memory_back():
    out = run("nt.retain_freed_memory(True); a = faults(); off = nt.retain_freed_memory(False); "
              "print(json.dumps([a, off, heap.retaining(), faults()]))")
    retained, off, retaining, released = out
    assert retained < FEW and off is False and retaining is False
    assert released > MANY


@glibc_only
def test_compile_turns_retention_on():
    out = run("first = heap.retaining(); compile_something(); print(json.dumps([first, heap.retaining(), faults()]))")
    first, then, after = out
    assert first is False and then is True
    assert after < FEW


@glibc_only
@pytest.mark.parametrize("env", [{"MALLOC_TRIM_THRESHOLD_": "131072"}, {"MALLOC_MMAP_THRESHOLD_": "131072"},
                                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"}])
def test_compile_leaves_malloc_alone_when_the_environment_configures_it(env):
    out = run("compile_something(); print(json.dumps([heap.retaining(), faults()]))", **env)
    retaining, after = out
    assert retaining is False
    assert after > MANY


@glibc_only
def test_compile_respects_an_earlier_choice():
    out = run("nt.retain_freed_memory(False); compile_something(); print(json.dumps([heap.retaining(), faults()]))")
    retaining, after = out
    assert retaining is False
    assert after > MANY


def test_retain_freed_memory_takes_a_bool():
    with pytest.raises(TypeError, match="enabled must be a bool"):
        nt.retain_freed_memory(1)


def test_other_c_libraries_are_left_alone(monkeypatch):
    from namedtensor.backends import heap

    monkeypatch.setattr(heap, "_glibc", lambda: None)
    monkeypatch.setattr(heap, "_state", {"decided": False, "on": False})
    assert nt.retain_freed_memory(True) is False
    assert heap.retaining() is False
