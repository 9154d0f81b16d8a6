"""The README's main job, ``python -m namedtensor.demo``: the task, a short run in-process (results,
checkpoint, reload), the device error, and the command itself learning the task."""

import os
import re
import subprocess
import sys

import pytest

import namedtensor as nt
from namedtensor import demo


def test_make_task_builds_named_sorting_problems_and_excludes_seen_ones():
    inputs, targets = demo.make_task(50, seed=1)
    assert inputs.names == targets.names == ("example", "seq")
    assert inputs.shape == targets.shape == (50, demo.SEQ_LEN)
    again, _ = demo.make_task(50, seed=1)
    assert again.tolist() == inputs.tolist()
    for x, y in zip(inputs.tolist(), targets.tolist()):
        digits, answer = x[: demo.DIGITS], y[demo.DIGITS :]
        assert x[demo.DIGITS] == demo.SEP
        assert y[: demo.DIGITS] == [demo.IGNORE] * demo.DIGITS
        assert answer == sorted(digits)
        assert x[demo.DIGITS + 1 :] == answer[:-1]  # the input is the target shifted by one
    full, _ = demo.make_task(60, seed=2)
    held, _ = demo.make_task(60, seed=2, exclude=full[{"example": slice(0, 10)}])
    assert held.tolist() == full.tolist()[10:]


def test_short_run_trains_saves_and_reloads(tmp_path, capsys):
    out = tmp_path / "ckpt"
    result = demo.main(["--steps", "6", "--out", str(out), "--seed", "0", "--no-progress"])
    printed = capsys.readouterr().out
    assert len(result["losses"]) == 6
    assert result["losses"][-1] < result["losses"][0] - 0.3
    assert 0.0 <= result["token_accuracy"] <= 1.0 and 0.0 <= result["sequence_accuracy"] <= 1.0
    assert [e["step"] for e in result["evals"]] == [2, 4]
    assert result["reload_identical"] is True
    path = out / "sorter.safetensors"
    assert result["checkpoint"] == str(path) and path.exists()
    checkpoint = nt.load(path)
    assert checkpoint["step"] == 6
    assert checkpoint["config"]["model"] == {"size": 64, "heads": 4, "layers": 2}
    assert checkpoint["model"]["tok.weight"].names == ("vocab", "embed")
    assert checkpoint["model"]["blocks.1.mlp.fc1.weight"].names == ("mlp", "embed")
    assert set(checkpoint["optimizer"]) == {"state", "param_groups"}
    model = demo.SortingTransformer(**checkpoint["config"]["model"])
    model.load_state_dict(checkpoint["model"])
    assert "attention weights ('batch', 'head', 'seq', 'key') [2, 4, 16, 16]" in printed
    assert "logits ('batch', 'seq', 'vocab')" in printed
    assert "reloaded checkpoint: outputs identical" in printed


def test_a_compiled_run_learns_as_the_eager_one(tmp_path, capsys):
    args = ["--steps", "6", "--seed", "1", "--no-progress"]
    eager = demo.main(args + ["--out", str(tmp_path / "eager")])
    compiled = demo.main(args + ["--out", str(tmp_path / "compiled"), "--compile"])
    printed = capsys.readouterr().out
    assert "training through nt.compile" in printed
    assert compiled["losses"] == pytest.approx(eager["losses"], rel=1e-5)
    assert compiled["token_accuracy"] == pytest.approx(eager["token_accuracy"], abs=2e-3)
    assert compiled["reload_identical"] is True


def test_compile_with_distributed_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(["--steps", "1", "--compile", "--distributed", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--compile with --distributed is not supported yet" in capsys.readouterr().err


def test_unavailable_device_is_a_usage_error_with_the_library_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(["--steps", "1", "--device", "tpu", "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--device tpu: unknown device 'tpu'; use 'cpu', 'cuda', 'cuda:N' or 'meta' (shapes only)." in err
    assert "Traceback" not in err
    assert not os.listdir(tmp_path)


def test_the_command_learns_to_sort(tmp_path):
    # 150 steps on the default seed: held-out token accuracy 0.976, whole answers 0.82 (chance 0.1, 1e-8)
    run = subprocess.run([sys.executable, "-m", "namedtensor.demo", "--steps", "150", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "training: 100%" in run.stderr  # the progress bar
    found = re.search(r"held-out token accuracy (\S+), whole sequences sorted exactly (\S+)", run.stdout)
    assert found, run.stdout
    assert float(found[1]) > 0.95
    assert float(found[2]) > 0.6
    assert "reloaded checkpoint: outputs identical" in run.stdout
    assert (tmp_path / "sorter.safetensors").exists()


def test_meta_device_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(["--steps", "1", "--device", "meta", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--device meta: meta tensors have shapes but no data" in capsys.readouterr().err
