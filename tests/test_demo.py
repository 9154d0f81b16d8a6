"""The README's main job, ``python -m namedtensor.demo``, runs and learns (few steps here)."""

from namedtensor import demo


def test_demo_learns_a_classifier_with_named_dims(capsys):
    accuracy = demo.main(["--steps", "30", "--seed", "0"])
    out = capsys.readouterr().out
    assert accuracy > 0.6  # four classes: chance is 0.25
    assert "caught: mul: dims ('batch', 'height', 'width') and ('batch',) do not match" in out
    assert "grad names ('feat', 'class')" in out
