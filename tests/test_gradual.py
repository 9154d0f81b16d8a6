"""Conversion mode: ``nt.gradual()`` records per line of user code which ops ran named or unnamed and where a
reshape dropped names; every name check stays as strict as outside it."""

import threading

import pytest

import namedtensor as nt
from namedtensor.autograd import mode

pytestmark = pytest.mark.usefixtures("backend")

BSE = ("batch", "seq", "embed")


def unconverted(x):
    b, t, e = x.shape
    heads = x.reshape(b, t, 2, e // 2)  # LINE: reshape
    return (heads * 2.0).sum(-1)  # LINE: mul sum


def _line_of(marker):
    import inspect

    lines, start = inspect.getsourcelines(unconverted)
    return start + next(i for i, text in enumerate(lines) if f"LINE: {marker}" in text)


def test_report_lists_named_unnamed_and_dropped_per_line():
    x = nt.randn(2, 5, 8, names=BSE)
    with nt.gradual():
        out = unconverted(x)
        unconverted(x.rename(None))
    assert out.names == ("batch", "seq", None)  # the mode changes no result
    report = nt.conversion_report()
    rows = {r.line: r for r in report.rows if r.file == __file__}
    reshape_row = rows[_line_of("reshape")]
    assert reshape_row.named == ("reshape",) and reshape_row.unnamed == ("reshape",)
    assert reshape_row.dropped == (("reshape", ("embed",)),)
    assert reshape_row.code == "heads = x.reshape(b, t, 2, e // 2)  # LINE: reshape"
    math_row = rows[_line_of("mul sum")]
    assert math_row.named == ("mul", "sum") and math_row.unnamed == ("mul", "sum")
    assert reshape_row in report.todo and math_row in report.todo
    text = str(report)
    assert f"{__file__}:{_line_of('reshape')}: heads = x.reshape" in text
    assert "dropped: reshape dropped the names ('embed',)" in text
    assert "unnamed: mul sum" in text


def test_fully_named_lines_are_not_todo():
    x = nt.randn(2, 3, names=("a", "b"))
    with nt.gradual():
        y = x.sum("b")
    (row,) = nt.conversion_report().rows
    assert row.named == ("sum",) and row.unnamed == () and row.dropped == ()
    assert nt.conversion_report().todo == []
    assert y.names == ("a",)


def test_mismatches_still_raise_in_gradual():
    a = nt.randn(2, 3, names=("a", "b"))
    b = nt.randn(3, names=("a",))
    with nt.gradual():
        with pytest.raises(nt.NamesError, match=r"mul: dims \('a', 'b'\) and \('a',\) do not match"):
            a * b
        with pytest.raises(nt.NamesError, match="flatten: flattening dims .* without out_name would drop"):
            a.flatten(("a", "b"))


def test_nothing_is_recorded_outside_the_mode():
    x = nt.randn(2, 5, 8, names=BSE)
    with nt.gradual():
        pass
    assert mode.current_tracer() is None
    unconverted(x)
    assert nt.conversion_report().rows == []
    assert str(nt.conversion_report()) == "conversion_report: no ops ran under nt.gradual()."


def test_nested_blocks_share_one_report_and_a_new_block_starts_afresh():
    x = nt.randn(2, 3, names=("a", "b"))
    with nt.gradual():
        x.sum("a")
        with nt.gradual():
            x.sum("b")
        assert len(nt.conversion_report().rows) == 2
    with nt.gradual():
        x.exp()
    assert [r.named for r in nt.conversion_report().rows] == [("exp",)]


def test_decorator():
    @nt.gradual()
    def f(x):
        return x.reshape(6)

    f(nt.randn(2, 3, names=("a", "b")))
    (row,) = nt.conversion_report().rows
    assert row.dropped == (("reshape", ("a", "b")),)
    assert row.code == "return x.reshape(6)"


def test_shape_trace_inside_gradual_still_records():
    x = nt.randn(2, 3, names=("a", "b"))
    with nt.gradual():
        trace = nt.trace_shapes(lambda t: t.exp().reshape(6), x)
    assert [row[0] for row in trace.rows] == ["exp", "reshape"]
    with nt.gradual():
        nt.trace_shapes(lambda t: t.exp(), nt.spec({"a": 2}))
        x.exp()
    assert len(nt.conversion_report().rows) == 1  # the block's own exp; the trace's went to the trace


def test_state_is_per_thread():
    x = nt.randn(2, 3, names=("a", "b"))
    seen = {}

    def other():
        x.exp()
        seen["tracer"] = mode.current_tracer()
        seen["rows"] = nt.conversion_report().rows

    with nt.gradual():
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        x.sum()
    assert seen == {"tracer": None, "rows": []}
    assert [r.named for r in nt.conversion_report().rows] == [("sum",)]
