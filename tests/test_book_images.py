"""The book's drawings: charts from (example) data, diagrams, the worked example, the cache."""

from __future__ import annotations

from math import gcd
from pathlib import Path

import numpy as np
import pytest

from tilelab.book import charts, data, diagrams, images, worked

EXAMPLES = Path(__file__).parent / "data" / "book"
PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == PNG and path.stat().st_size > 2000


def test_worked_example_matches_numpy():
    assert worked.check()
    last = worked.phases(0, 0)[-1].partial
    assert np.array_equal(last, (worked.A @ worked.B)[:2, :2])


def test_reuse_factor_is_the_tile_width():
    for n, b in ((4, 2), (1024, 16), (4096, 32)):
        r = worked.global_reads(n, b)
        assert r["naive"] == 2 * n * b * b and r["tiled"] == 2 * n * b and r["factor"] == b


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 8, 16, 32, 33, 64])
def test_bank_degree_is_gcd_with_32(stride):
    assert diagrams.bank_degree(stride) == gcd(stride, 32)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_every_diagram_draws(name, tmp_path):
    out = tmp_path / f"{name}.png"
    if name == "hierarchy":
        diagrams.hierarchy(out, data.load(EXAMPLES, "device").rows[0])
    else:
        diagrams.DIAGRAMS[name](out)
    assert _is_png(out)


def test_hierarchy_draws_without_device_data(tmp_path):
    diagrams.hierarchy(tmp_path / "h.png", None)
    assert _is_png(tmp_path / "h.png")


@pytest.mark.parametrize(
    "spec",
    [
        charts.ChartSpec("bar", "matmul", y="gflops", hue="n"),
        charts.ChartSpec("bar", "bank_stride", x="stride", y="slowdown", overlay="emu_degree"),
        charts.ChartSpec("line", "matmul", x="n", y="gflops", hue="kernel", logy=True),
        charts.ChartSpec("roofline", "matmul", where={"n": ["4096"]},
                         points={"naive": "0.25", "tiled32": "8", "cublas": "ideal"}),
    ],
    ids=lambda s: f"{s.kind}-{s.experiment}",
)
def test_charts_draw_from_example_data(spec, tmp_path):
    sets = {name: data.load(EXAMPLES, name) for name in ("matmul", "bank_stride", "device")}
    out = tmp_path / "chart.png"
    charts.draw(spec, sets, out, [(50000.0, "peak")])
    assert _is_png(out)


def test_unknown_chart_kind(tmp_path):
    with pytest.raises(ValueError):
        charts.draw(charts.ChartSpec("pie", "matmul"), {}, tmp_path / "x.png", [])


def test_image_cache_draws_once_and_keys_on_data(tmp_path):
    calls = []

    def draw(path: Path) -> None:
        calls.append(path)
        path.write_bytes(PNG)

    uri = images.ensure_image(tmp_path, "x.png", draw)
    assert uri == "/book/_generated/x.png" and (tmp_path / "book/_generated/x.png").exists()
    images.ensure_image(tmp_path, "x.png", draw)
    assert len(calls) == 1
    assert (tmp_path / "book/_generated/.gitignore").read_text().strip().endswith("*")
    f = tmp_path / "d.json"
    f.write_text("1")
    k1 = images.image_key("bar", {"y": "gflops"}, [f])
    f.write_text("2")
    assert images.image_key("bar", {"y": "gflops"}, [f]) != k1
    assert images.image_key("bar", {"y": "gbps"}, [f]) != images.image_key("bar", {}, [f])
