"""Conversion mode: ``nt.gradual()`` records per line of user code which ops ran named or unnamed and where an
op dropped names; flatten/unflatten leave the names they cannot infer out instead of raising, every other
name check stays as strict as outside it."""

import pickle
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.autograd import mode
from namedtensor.nn import functional as F
from namedtensor.testing import strategies as nts

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
    abc = nt.randn(2, 3, 4, names=("a", "b", "c"))
    with nt.gradual():
        with pytest.raises(nt.NamesError, match=r"mul: dims \('a', 'b'\) and \('a',\) do not match"):
            a * b
        # flatten/unflatten soften only the name they cannot infer; their other errors stay
        with pytest.raises(nt.NamesError, match="must be consecutive and in order"):
            abc.flatten(("a", "c"))
        with pytest.raises(nt.NamesError, match="the new name 'a' is already a dim"):
            abc.flatten(("b", "c"), "a")
        with pytest.raises(nt.NamesError, match="the new name 'a' is already a dim"):
            a.unflatten("b", (("a", 3), ("c", 1)))
        with pytest.raises(nt.NamesError, match=r"got 1 names \('p',\) for 2 sizes"):
            a.unflatten("b", (3, 1), names=("p",))
        with pytest.raises(ValueError, match=r"sizes \(2, 2\) don't multiply up to the size of dim 1 \('b'\)"):
            a.unflatten("b", (2, 2))
    assert nt.conversion_report().rows == []  # nothing ran to the end, so nothing was recorded


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


def flatten_named(x):
    return x.flatten(("seq", "embed"))  # LINE: flatten


def unflatten_named(x):
    return x.unflatten("embed", (2, -1))  # LINE: unflatten


def _line_in(fn, marker):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if f"LINE: {marker}" in text)


def test_flatten_and_unflatten_without_names_raise_outside_the_mode():
    x = nt.randn(2, 5, 8, names=BSE)
    with nt.gradual():
        pass  # an empty report, which the refusals below must leave empty
    with pytest.raises(_names.NamesDropped, match=r"flatten: flattening dims \('seq', 'embed'\) .* would drop the names"):
        flatten_named(x)
    with pytest.raises(_names.NamesDropped, match="unflatten: input is named but no names were given"):
        unflatten_named(x)
    assert nt.conversion_report().rows == []


def test_flatten_drops_only_the_merged_names_in_the_mode_and_records_them():
    x = nt.randn(2, 5, 8, names=BSE)
    with nt.gradual():
        out = flatten_named(x)
    assert out.names == ("batch", None) and out.shape == (2, 40)
    np.testing.assert_array_equal(out.numpy(), x.numpy().reshape(2, 40))
    (row,) = nt.conversion_report().rows
    assert row.line == _line_in(flatten_named, "flatten") and row.file == __file__
    assert row.code == 'return x.flatten(("seq", "embed"))  # LINE: flatten'
    assert row.named == ("reshape",) and row.dropped == (("flatten", ("seq", "embed")),)
    assert nt.conversion_report().todo == [row]
    assert "dropped: flatten dropped the names ('seq', 'embed')" in str(nt.conversion_report())


def test_unflatten_leaves_only_the_new_dims_unnamed_in_the_mode_and_records_it():
    x = nt.randn(2, 5, 8, names=BSE, requires_grad=True)
    with nt.gradual():
        out = unflatten_named(x)
        out.sum().backward()  # the degraded result is an ordinary view: its gradient reshapes back
    assert out.names == ("batch", "seq", None, None) and out.shape == (2, 5, 2, 4)
    np.testing.assert_array_equal(out.detach().numpy(), x.detach().numpy().reshape(2, 5, 2, 4))
    assert x.grad.names == BSE and np.array_equal(x.grad.numpy(), np.ones((2, 5, 8)))
    row = next(r for r in nt.conversion_report().rows if r.line == _line_in(unflatten_named, "unflatten"))
    assert row.dropped == (("unflatten", ("embed",)),)
    assert "dropped: unflatten dropped the names ('embed',)" in str(nt.conversion_report())


def test_flatten_of_unnamed_or_partly_named_dims_in_the_mode():
    x = nt.randn(2, 3, 4, names=("a", None, None))
    with nt.gradual():
        unnamed = x.flatten((1, 2))  # nothing to drop: no record of a drop
        partly = x.flatten(0, 1)  # drops only 'a'; the unnamed dim had no name to lose
        named = x.flatten((1, 2), "bc")  # out_name given: nothing dropped
    assert unnamed.names == ("a", None) and partly.names == (None, None) and named.names == ("a", "bc")
    assert [r.dropped for r in nt.conversion_report().rows] == [(), (("flatten", ("a",)),), ()]


@given(nts.names(5, named_fraction=0.7), st.integers(0, 4), st.integers(0, 4), st.data())
def test_mode_flatten_names_match_the_rule(names, i, j, data):
    start, end = min(i, j), max(i, j)
    x = nt.tensor(np.arange(2 * 3 * 1 * 2 * 2.0).reshape(2, 3, 1, 2, 2), names=names)
    with nt.gradual():
        out = x.flatten(start, end)
    merged = tuple(n for n in names[start : end + 1] if n is not None)
    lost = merged if end > start else ()  # one dim "merged" keeps its name
    kept = names[start] if end == start else None
    assert out.names == names[:start] + (kept,) + names[end + 1 :]
    np.testing.assert_array_equal(out.numpy(), x.numpy().reshape(out.shape))
    dropped = [d for r in nt.conversion_report().rows for d in r.dropped]
    assert dropped == ([("flatten", lost)] if lost else [])


@given(nts.names(3, named_fraction=0.7), st.integers(0, 2))
def test_mode_unflatten_names_match_the_rule(names, ax):
    x = nt.tensor(np.arange(4 * 4 * 4.0).reshape(4, 4, 4), names=names)
    with nt.gradual():
        out = x.unflatten(ax, (2, 2))
    assert out.names == names[:ax] + (None, None) + names[ax + 1 :]
    np.testing.assert_array_equal(out.numpy(), x.numpy().reshape(out.shape))
    dropped = [d for r in nt.conversion_report().rows for d in r.dropped]
    assert dropped == ([("unflatten", (names[ax],))] if names[ax] is not None else [])


def test_names_dropped_error_pickles_with_its_result():
    with pytest.raises(_names.NamesDropped) as info:
        _names.flatten(("a", "b", "c"), (1, 2), None)
    assert isinstance(info.value, nt.NamesError)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.result, copy.dropped) == (str(info.value), (1, 3, ("a", None)), ("b", "c"))


def test_ravel_of_named_dims_degrades_in_the_mode_only():
    x = nt.randn(2, 3, names=("a", "b"))
    with pytest.raises(nt.NamesError, match="ravel: flattening dims .* without out_name would drop"):
        x.ravel()
    with nt.gradual():
        flat = x.ravel()
    assert flat.names == (None,) and flat.tolist() == x.numpy().ravel().tolist()
    dropped = [row for row in nt.conversion_report().rows if row.dropped]
    assert dropped and dropped[-1].dropped == (("flatten", ("a", "b")),)


def test_attention_asks_for_the_query_dim_only_in_its_named_form():
    q = nt.randn(2, 3, 5, 8, names=("batch", "head", "seq", "hd"))
    k = nt.randn(2, 7, 8, names=("batch", "key", "hd"))  # multi-query: k and v lack the head dim
    positional_k = k.rename(key=None).unsqueeze(1)  # ('batch', None, None, 'hd'): broadcasts over the heads
    with nt.gradual():
        with pytest.raises(nt.NamesError, match=r"cannot infer the queries' sequence dim: q has 2 dims .*"
                                                r"Pass query_dim="):
            F.scaled_dot_product_attention(q, k, k, dim="hd", key_dim="key")
        out = F.scaled_dot_product_attention(q, k, k, dim="hd", key_dim="key", query_dim="seq")
        # PyTorch's form, as unconverted code calls it: the query dim is q's second-to-last, by position
        same = F.scaled_dot_product_attention(q, positional_k, positional_k)
    assert out.names == same.names == ("batch", "head", "seq", "hd")
    nt.testing.assert_close(out, same)
    (named_row, positional_row) = nt.conversion_report().rows
    assert named_row.named == ("scaled_dot_product_attention",) and named_row.dropped == ()
    assert positional_row.named == ("scaled_dot_product_attention",) and positional_row.dropped == ()
