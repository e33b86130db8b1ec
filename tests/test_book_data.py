"""The book extension's data logic: loading, filters, value expressions, tables, formats.

Runs on the example files in tests/data/book (made-up values, never the book's data).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelab.book import data, expr, tables
from tilelab.book.data import DataError, Missing

EXAMPLES = Path(__file__).parent / "data" / "book"


def load(name: str) -> data.Dataset | None:
    return data.load(EXAMPLES, name)


def test_example_files_say_they_are_examples():
    files = sorted(EXAMPLES.glob("*.json"))
    assert files
    for path in files:
        doc = json.loads(path.read_text())
        assert "not a measurement" in doc["description"].lower(), path.name
        assert doc["experiment"] == path.stem


def test_missing_file_is_none_not_an_error(tmp_path):
    assert data.load(tmp_path, "matmul") is None


def test_malformed_file_is_a_data_error(tmp_path):
    (tmp_path / "matmul.json").write_text("{not json")
    with pytest.raises(DataError):
        data.load(tmp_path, "matmul")
    (tmp_path / "matmul.json").write_text('{"rows": 3}')
    with pytest.raises(DataError):
        data.load(tmp_path, "matmul")


def test_experiment_names_are_checked():
    with pytest.raises(DataError):
        data.data_path(EXAMPLES, "../etc/passwd")


def test_filters_select_rows():
    ds = load("matmul")
    rows = ds.select(data.parse_filters("kernel=naive|tiled32, n=4096"))
    assert sorted(r["kernel"] for r in rows) == ["naive", "tiled32"]
    assert ds.one(data.parse_filters("kernel=tiled16,n=1024"))["n"] == 1024
    with pytest.raises(Missing):
        ds.one(data.parse_filters("kernel=naive"))  # three sizes: not one row
    with pytest.raises(Missing):
        ds.select(data.parse_filters("colour=red"))


def test_wildcard_keeps_rows_that_have_the_column():
    ds = load("emu_analysis")
    rows = ds.select(data.parse_filters("variant=*"))
    assert rows and all(r.get("variant") for r in rows)


def test_bad_filter_is_a_data_error():
    with pytest.raises(DataError):
        data.parse_filters("kernel")


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [
        (5338.2, None, "5,338"),
        (142.56, None, "143"),
        (15.314, None, "15.3"),
        (0.0784, None, "0.0784"),
        (1.681, ".2f", "1.68"),
        (0.5, ".0%", "50%"),
        (49152, "bytes", "48 KiB"),
        (52428800, "bytes", "50 MiB"),
        (1536, "bytes", "1.5 KiB"),
        (65536, None, "65,536"),
        (None, None, "—"),
        ("NVIDIA H100", None, "NVIDIA H100"),
    ],
)
def test_format_value(value, spec, text):
    assert data.format_value(value, spec) == text


def test_labels_add_units():
    assert data.label("gflops", "GFLOP/s") == "GFLOP/s"
    assert data.label("median_ms", "ms") == "median time (ms)"
    assert data.label("registers", "", {"registers": "registers per thread"}) == (
        "registers per thread")


def test_expression_of_one_value():
    e = expr.parse("matmul[kernel=naive, n=4096].gflops :,.0f")
    assert e.experiments == ["matmul"]
    assert e.render(load) == f"{2 * 4096**3 / 32.0 / 1e6:,.0f}"
    _, unit = e.evaluate(load)
    assert unit == "GFLOP/s"


def test_expression_arithmetic_across_files():
    e = expr.parse("matmul[kernel=naive,n=4096].gflops / device.fp32_peak_gflops * 100 :.0f")
    assert e.experiments == ["matmul", "device"]
    naive = load("matmul").one({"kernel": ["naive"], "n": ["4096"]})["gflops"]
    peak = load("device").rows[0]["fp32_peak_gflops"]
    assert e.render(load) == f"{naive / peak * 100:.0f}"


def test_text_value():
    assert expr.parse("device.name").render(load) == "Example GPU"


@pytest.mark.parametrize(
    "bad",
    ["", "42", "matmul[kernel=naive].gflops ** 2", "__import__('os').system('x')",
     "matmul[kernel=naive,n=1024].gflops :zz", "device.name + 'x'"],
)
def test_bad_expressions_are_data_errors(bad):
    with pytest.raises(DataError):
        expr.parse(bad)


def test_missing_file_and_missing_row_raise_missing(tmp_path):
    with pytest.raises(Missing) as info:
        expr.parse("sass[kernel=tiled32].lds_total").render(lambda name: data.load(tmp_path, name))
    assert info.value.experiment == "sass" and not info.value.detail
    with pytest.raises(Missing) as info:
        expr.parse("matmul[kernel=nope,n=4096].gflops").render(load)
    assert "matches 0 rows" in info.value.detail


def test_compare_times_and_rates():
    # times: lower is faster
    slower = expr.compare(
        "matmul[kernel=tiled32_padded,n=4096].median_ms vs matmul[kernel=tiled32,n=4096].median_ms",
        load)
    assert slower == f"{23.0 / 18.0:.2f}× slower"
    faster = expr.compare(
        "matmul[kernel=tiled32,n=4096].median_ms vs matmul[kernel=naive,n=4096].median_ms", load)
    assert faster == f"{32.0 / 18.0:.2f}× faster"
    # rates: higher is faster
    rate = expr.compare(
        "transpose[kernel=padded,n=4096].gbps vs transpose[kernel=shared,n=4096].gbps", load)
    assert rate.endswith("× faster")
    # counts, with our own words
    more = expr.compare(
        "sass[kernel=tiled32_padded].lds_total vs sass[kernel=tiled32].lds_total :.1f more/fewer",
        load)
    assert more == "1.6× more"
    assert expr.compare_experiments("sass[kernel=a].x vs device.y") == ["sass", "device"]
    with pytest.raises(DataError):
        expr.compare("matmul[kernel=naive,n=4096].gflops", load)


def test_table_build_orders_formats_and_labels():
    ds = load("matmul")
    order_by, order = tables.parse_order("kernel: tiled32, naive")
    spec = tables.TableSpec(where={"n": ["4096"], "kernel": ["naive", "tiled32"]},
                            columns=("kernel", "median_ms", "gflops"),
                            formats={"median_ms": ".1f"}, order_by=order_by, order=order)
    heads, cells, numeric = tables.build(ds, spec)
    assert heads == ["kernel", "median time (ms)", "GFLOP/s"]
    assert [c[0] for c in cells] == ["tiled32", "naive"]
    assert cells[0][1] == "18.0"
    assert numeric == [False, True, True]


def test_table_missing_rows_and_columns_raise_missing():
    ds = load("matmul")
    with pytest.raises(Missing):
        tables.build(ds, tables.TableSpec(where={"kernel": ["nope"]}))
    with pytest.raises(Missing):
        tables.build(ds, tables.TableSpec(columns=("kernel", "colour")))


def test_transpose_of_a_one_row_table():
    heads, cells, _ = tables.transpose(["a", "b"], [["1", "2"]], [True, True])
    assert heads == ["property", "value"] and cells == [["a", "1"], ["b", "2"]]


def test_missing_hint_names_the_command():
    _, cmd, where = data.missing_hint("matmul")
    assert cmd == "tilelab bench matmul --out book/data" and where == "on a GPU"
    assert data.missing_hint("emu_analysis")[2] == "(no GPU needed)"


def test_a_claim_holds_or_names_the_values_that_contradict_it():
    """A qualitative sentence rests on conditions the data must meet: met, nothing to say;
    not met, the condition and both values; a plain number may stand on one side."""
    true = expr.parse_claim(
        "padding made it slower :: matmul[kernel=tiled32_padded,n=4096].median_ms > "
        "matmul[kernel=tiled32,n=4096].median_ms")
    assert true.text == "padding made it slower" and true.experiments == ["matmul"]
    assert true.failed(load) == []
    false = expr.parse_claim(
        "padding made it faster :: matmul[kernel=tiled32_padded,n=4096].median_ms < "
        "matmul[kernel=tiled32,n=4096].median_ms and device.sm_count > 0")
    (why,) = false.failed(load)
    assert why.startswith("matmul[kernel=tiled32_padded,n=4096].median_ms < ") and ", but " in why
    assert expr.parse_claim("x :: device.sm_count >= 1").failed(load) == []
    assert expr.parse_claim("x :: 1 < device.sm_count").failed(load) == []


@pytest.mark.parametrize("bad", ["no conditions", "x :: 1 < 2", "x :: device.sm_count",
                                 ":: device.sm_count > 1"])
def test_a_malformed_claim_is_a_data_error(bad):
    with pytest.raises(DataError):
        expr.parse_claim(bad)


def test_a_claim_on_data_not_measured_yet_is_missing_not_false(tmp_path):
    claim = expr.parse_claim("x :: sgemm[kernel=shapes,n=3072].tflops > 1")
    with pytest.raises(Missing):
        claim.failed(lambda e: data.load(tmp_path, e))
