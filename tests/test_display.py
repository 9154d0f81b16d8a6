"""Rich display: ``_repr_html_`` (header, tables, summary, truncation, escaping) and ``plot`` (matplotlib)."""

from html.parser import HTMLParser

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

import namedtensor as nt
from namedtensor import display
from namedtensor.tensor import Tensor, install_methods

install_methods(display.METHODS)
matplotlib.use("Agg")

pytestmark = pytest.mark.usefixtures("backend")


class _Tables(HTMLParser):
    """Collects every table as rows of ``(tag, text)`` cells, and all text outside tables."""

    def __init__(self):
        super().__init__()
        self.tables, self.text, self._cell, self.colspans = [], [], None, []

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("th", "td"):
            self._cell = [tag, ""]
            self.colspans += [int(v) for k, v in attrs if k == "colspan"]

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self.tables[-1][-1].append(tuple(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data
        else:
            self.text.append(data)


def _parse(t):
    html = t._repr_html_()
    assert html == display.repr_html(t)
    p = _Tables()
    p.feed(html)
    p.close()
    return p, html


def _values(table):
    """The data cells' texts, row by row (header rows have none)."""
    return [[text for tag, text in row if tag == "td"] for row in table if any(tag == "td" for tag, _ in row)]


def _row_labels(table):
    return [row[0][1] for row in table if any(tag == "td" for tag, _ in row)]


def test_0d_shows_the_value():
    p, _ = _parse(nt.tensor(2.5))
    assert p.tables == []
    text = "".join(p.text)
    assert "scalar" in text and "float32" in text and "2.5" in text


def test_1d_one_row_headed_by_the_dim():
    p, html = _parse(nt.tensor(np.array([1.5, -2.0, 3.25]), names=("seq",)))
    assert "seq: 3" in "".join(p.text) and "float64" in html
    (table,) = p.tables
    assert len(table) == 2  # the header row and one row of values
    assert table[0] == [("th", "seq"), ("th", "0"), ("th", "1"), ("th", "2")]
    assert _values(table) == [["1.5", "-2.", "3.25"]]


def test_2d_row_dim_in_corner_column_dim_over_columns():
    a = np.arange(6).reshape(2, 3)
    p, _ = _parse(nt.tensor(a, names=("batch", "feat")))
    assert "batch: 2 × feat: 3" in "".join(p.text)
    (table,) = p.tables
    assert table[0] == [("th", ""), ("th", "feat")] and p.colspans == [3]
    assert table[1] == [("th", "batch"), ("th", "0"), ("th", "1"), ("th", "2")]
    assert _row_labels(table) == ["0", "1"]
    assert _values(table) == [["0", "1", "2"], ["3", "4", "5"]]


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 2, 3, 4)])
def test_higher_ranks_summary_and_first_slice(shape):
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) - 5
    names = ("batch", "head", "seq", "feat")[-len(shape):]
    p, _ = _parse(nt.tensor(a, names=names))
    text = "".join(p.text)
    assert " × ".join(f"{n}: {s}" for n, s in zip(names, shape)) in text
    assert "float64" in text
    assert f"min -5. · max {a.max():.0f}. · mean {a.mean():g}" in text
    where = ", ".join(f"{n}=0" for n in names[:-2])
    assert f"first slice shown: {where}" in text
    (table,) = p.tables
    assert table[0][1] == ("th", names[-1]) and table[1][0] == ("th", names[-2])
    first = a[(0,) * (len(shape) - 2)]
    assert _values(table) == [[f"{v:.0f}." for v in row] for row in first]


def test_int_mean_is_a_float_and_bool_has_no_stats():
    p, _ = _parse(nt.tensor(np.arange(8).reshape(2, 2, 2)))
    assert "min 0 · max 7 · mean 3.5" in "".join(p.text)
    p, _ = _parse(nt.tensor(np.ones((2, 2, 2), dtype=bool), names=("a", "b", "c")))
    text = "".join(p.text)
    assert "min" not in text and "bool" in text
    assert _values(p.tables[0]) == [["True", "True"], ["True", "True"]]


@pytest.mark.parametrize("shape,zero", [((0,), "x"), ((3, 0), "y"), ((2, 0, 4), "y")])
def test_empty_tensors(shape, zero):
    names = ("x", "y", "z")[:len(shape)]
    p, _ = _parse(nt.tensor(np.zeros(shape), names=names))
    text = "".join(p.text)
    assert p.tables == []
    assert f"empty tensor (no elements: {zero} has size 0)" in text
    assert " × ".join(f"{n}: {s}" for n, s in zip(names, shape)) in text


def test_unnamed_dims_read_dim_n():
    p, _ = _parse(nt.tensor(np.zeros((2, 3)), names=(None, "feat")))
    assert "dim 0: 2 × feat: 3" in "".join(p.text)
    assert p.tables[0][1][0] == ("th", "dim 0")
    p, _ = _parse(nt.tensor(np.zeros((2, 3, 4))))
    assert "dim 0: 2 × dim 1: 3 × dim 2: 4" in "".join(p.text)
    assert "first slice shown: dim 0=0" in "".join(p.text)
    assert p.tables[0][0][1] == ("th", "dim 2") and p.tables[0][1][0] == ("th", "dim 1")


def test_large_2d_is_truncated_to_first_and_last_five():
    a = np.arange(30 * 25).reshape(30, 25)
    p, _ = _parse(nt.tensor(a, names=("row", "col")))
    (table,) = p.tables
    # 5 + 5 entries shown per dim, plus one ellipsis row and one ellipsis column
    assert p.colspans == [11]
    assert [text for _, text in table[1][1:]] == ["0", "1", "2", "3", "4", "…", "20", "21", "22", "23", "24"]
    assert _row_labels(table) == ["0", "1", "2", "3", "4", "⋮", "25", "26", "27", "28", "29"]
    values = _values(table)
    assert len(values) == 11 and all(len(r) == 11 for r in values)
    keep_r = [*range(5), *range(25, 30)]
    keep_c = [*range(5), *range(20, 25)]
    shown = [r[:5] + r[6:] for i, r in enumerate(values) if i != 5]
    assert shown == [[str(a[i, j]) for j in keep_c] for i in keep_r]
    assert values[5] == ["⋮"] * 11 and all(r[5] == "…" for i, r in enumerate(values) if i != 5)


def test_dim_of_exactly_twenty_is_not_truncated():
    p, _ = _parse(nt.tensor(np.arange(20), names=("x",)))
    assert _values(p.tables[0]) == [[str(i) for i in range(20)]]


def test_large_higher_rank_slice_is_truncated():
    p, _ = _parse(nt.tensor(np.zeros((3, 21, 2)), names=("a", "b", "c")))
    assert _row_labels(p.tables[0]) == ["0", "1", "2", "3", "4", "⋮", "16", "17", "18", "19", "20"]


def test_cells_use_the_repr_number_format():
    # the values share repr's notation: precision 4, small values suppressed, one format per table
    a = np.array([[1.0, 2.123456], [1e-9, 3.0]])
    t = nt.tensor(a, names=("r", "c"))
    p, _ = _parse(t)
    assert _values(p.tables[0]) == [["1.", "2.1235"], ["0.", "3."]]
    for cell in ("1.", "2.1235", "0.", "3."):
        assert cell in repr(t)
    p, _ = _parse(nt.tensor(np.array([1e10, 1.0]), names=("x",)))
    assert _values(p.tables[0]) == [["1.e+10", "1.e+00"]]
    p, _ = _parse(nt.tensor(np.array([True, False]), names=("x",)))
    assert _values(p.tables[0]) == [["True", "False"]]
    p, _ = _parse(nt.tensor(np.array([7, -3], dtype=np.int32), names=("x",)))
    assert _values(p.tables[0]) == [["7", "-3"]] and "int32" in "".join(p.text)


def test_requires_grad_and_grad_fn_in_header():
    leaf = nt.tensor(np.ones(3), names=("x",), requires_grad=True)
    _, html = _parse(leaf)
    assert "requires_grad=True" in html and "grad_fn" not in html
    _, html = _parse(leaf * 2)
    assert f"grad_fn={(leaf * 2).grad_fn.op.name}" in html and "requires_grad" not in html
    _, html = _parse(nt.tensor(np.ones(3), names=("x",)))
    assert "grad" not in html


def test_text_is_html_escaped(monkeypatch):
    # real names are identifiers and real values are numbers, so feed hostile text in from below
    base = nt.tensor(np.zeros((2, 2)))
    t = Tensor._make(base.array, ("<b>", "a&b"), base._B)
    monkeypatch.setattr(display, "format_cells", lambda a: ['<script>"x"</script>'] * a.size)
    p, html = _parse(t)
    assert "<b>:" not in html and "<script>" not in html and "a&b" not in html
    assert "&lt;b&gt;: 2 × a&amp;b: 2" in html and "&lt;script&gt;" in html
    # the parser unescapes: the texts read back exactly
    assert p.tables[0][1][0] == ("th", "<b>") and p.tables[0][0][1] == ("th", "a&b")
    assert _values(p.tables[0]) == [['<script>"x"</script>'] * 2] * 2


# ---------------------------------------------------------------------------------------------------- plot



@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_plot_1d_line(ax):
    a = np.array([0.5, 2.0, -1.0, 3.0])
    out = nt.tensor(a, names=("time",)).plot(ax=ax, color="red")
    assert out is ax
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), np.arange(4))
    np.testing.assert_array_equal(line.get_ydata(), a)
    assert ax.get_xlabel() == "time" and line.get_color() == "red"


def test_plot_2d_heatmap(ax):
    a = np.arange(12.0).reshape(3, 4)
    out = nt.tensor(a, names=("query", "key")).plot(ax=ax, cmap="viridis")
    assert out is ax
    (image,) = ax.get_images()
    np.testing.assert_array_equal(np.asarray(image.get_array()), a)
    assert ax.get_ylabel() == "query" and ax.get_xlabel() == "key"
    assert image.get_cmap().name == "viridis"
    assert len(ax.figure.axes) == 2  # the colorbar has its own axes


def test_plot_unnamed_bool_and_grad(ax):
    t = nt.tensor(np.array([[True, False], [False, True]]), names=(None, "b"))
    t.plot(ax=ax)
    np.testing.assert_array_equal(np.asarray(ax.get_images()[0].get_array()), np.eye(2))
    assert ax.get_ylabel() == "dim 0" and ax.get_xlabel() == "b"
    g = nt.tensor(np.array([1.0, 2.0]), requires_grad=True) * 3
    g.plot(ax=ax)
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), [3.0, 6.0])
    assert ax.get_xlabel() == "dim 0"


def test_plot_defaults_to_current_axes():
    fig = plt.figure()
    try:
        out = nt.tensor(np.ones(3), names=("x",)).plot()
        assert out is fig.gca() and len(out.get_lines()) == 1
    finally:
        plt.close(fig)


def test_plot_rank_errors(ax):
    with pytest.raises(ValueError, match=r"3 dims \('batch', 'seq', 'feat'\): select or reduce dims first, "
                                         r"e\.g\. t\[\{'batch': 0\}\]"):
        nt.tensor(np.zeros((2, 2, 2)), names=("batch", "seq", "feat")).plot(ax=ax)
    with pytest.raises(ValueError, match=r"e\.g\. t\[\{0: 0\}\] or t\.mean\(0\)"):
        nt.tensor(np.zeros((2, 2, 2))).plot(ax=ax)
    with pytest.raises(ValueError, match=r"0 dims \(\): a 0-dim tensor is one number: t\.item\(\)"):
        nt.tensor(1.0).plot(ax=ax)
    with pytest.raises(ValueError, match="the tensor is empty"):
        nt.tensor(np.zeros((0, 2)), names=("a", "b")).plot(ax=ax)


def test_plot_without_matplotlib(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match=r'pip install "named-tensors\[plot\]"'):
        nt.tensor(np.ones(3), names=("x",)).plot()


def test_set_printoptions_as_pytorch():
    t = nt.arange(12.0).reshape(3, 4, names=("row", "col")) / 7
    try:
        nt.set_printoptions(precision=2)
        assert "0.14, 0.29" in repr(t) and "0.1429" not in repr(t)
        assert "0.14" in t._repr_html_()  # the HTML cells use the same notation
        nt.set_printoptions(precision=3, sci_mode=True)
        assert "1.429e-01" in repr(t)
        nt.set_printoptions(sci_mode=False)
        assert "e-01" not in repr(t / 1e6) and "0.000" in repr(t / 1e6)
        nt.set_printoptions(sci_mode=None)  # as in PyTorch, None restores the automatic choice
        nt.set_printoptions(profile="short")
        assert repr(nt.arange(1000.0)).startswith("tensor([  0.,   1., ..., 998., 999.]")
        nt.set_printoptions(profile="full")
        assert "..." not in repr(nt.arange(1000))
        assert nt.get_printoptions()["precision"] == 4
        nt.set_printoptions(threshold=float("inf"), edgeitems=1, linewidth=40)
        assert all(len(line) <= 40 for line in repr(nt.arange(30)).splitlines()[:-1])
        with pytest.raises(ValueError, match="set_printoptions: profile must be 'default', 'short' or 'full'"):
            nt.set_printoptions(profile="long")
        with pytest.raises(ValueError, match="set_printoptions: precision must be a number >= 0, got -1"):
            nt.set_printoptions(precision=-1)
        with pytest.raises(TypeError, match="set_printoptions: sci_mode must be True, False or None"):
            nt.set_printoptions(sci_mode="yes")
    finally:
        nt.set_printoptions(profile="default")
    assert nt.get_printoptions() == {"precision": 4, "threshold": 200, "edgeitems": 3, "linewidth": 75,
                                     "sci_mode": None}
    assert "0.1429" in repr(t)
