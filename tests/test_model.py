"""The model of what limits each kernel: hand-worked counts, and predictions from the data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelab.experiments import perfmodel as model

DATA = Path(__file__).resolve().parents[1] / "book" / "data"


@pytest.mark.parametrize("words,passes", [
    ([lane for lane in range(32)], 1),            # 32 consecutive words: 32 banks
    ([lane * 32 for lane in range(32)], 32),      # a column of [32][32]: one bank
    ([lane * 33 for lane in range(32)], 1),       # a column of [32][33]: 32 banks
    ([lane * 2 for lane in range(32)], 2),        # stride 2: 16 banks, twice
    ([0] * 32, 1),                                # one word: a broadcast
    ([0, 0, 32, 32, *range(1, 29)], 2),            # bank 0: two distinct words, 2 passes
])
def test_bank_passes_count_distinct_words_per_bank(words, passes):
    assert model.bank_passes(words) == passes


def test_global_lines_of_a_warp():
    assert model.lines([4 * i for i in range(32)]) == 1          # 128 consecutive bytes
    assert model.lines([4 * 1024 * i for i in range(32)]) == 32  # a column: a line each


@pytest.mark.parametrize("key,per_unit", [
    ("naive", 3),                         # A: 2 rows -> 2 lines; B: 16 floats -> 1 line
    ("naive_xrow", 17),                   # A: 16 rows -> 16 lines; B: 1 line
    ("tiled16", (16 + 4 * 2 + 2 + 2 + 1 + 1) / 16),
    ("tiled32", (32 + 8 * 2 + 1 + 1 + 1 + 1) / 32),     # Bs 32 + 8 uniform LDS.128
    ("tiled32_padded", (64 + 4) / 32),                   # no LDS.128: 64 LDS.32
    ("tiled32_at", (64 + 1 + 1 + 32 + 1) / 32),          # the As store is 32-way
    ("tiled32_at_padded", (64 + 4) / 32),
    ("transpose_shared", 1 + 1 + 32 + 1),                # the column read is 32-way
    ("transpose_padded", 4),
    ("transpose_naive", 1 + 32),                         # a store touches 32 lines
])
def test_wavefronts_per_unit_match_the_hand_count(key, per_unit):
    assert model.COUNTERS[key](1024).wavefronts_per_unit == pytest.approx(per_unit)


def test_128_bit_rule_matches_the_compiled_kernels():
    """nvcc's LDS.128 use (sass.json) is what the model assumes for each layout."""
    sass = {r["kernel"]: r for r in json.loads((DATA / "sass.json").read_text())["rows"]}
    layouts = {"tiled16": (16, 0, False), "tiled32": (32, 0, False),
               "tiled32_padded": (32, 1, False), "tiled32_at": (32, 0, True),
               "tiled32_at_padded": (32, 1, True)}
    assert layouts.keys() <= sass.keys()  # every layout's kernel measured
    for key, (tile, pad, at) in layouts.items():
        assert (sass[key]["lds_128"] > 0) == model.a_loads_are_128_bit(tile, pad, at), key


def test_predict_names_the_slowest_resource():
    rates = model.Rates(sm_count=2, clock_hz=1e9, wavefronts_per_clock=1.0,
                        dram_bytes_per_s=1e9)
    c = model.Counts("k", blocks=2, wavefronts=4e9, instructions=4e9, dram_bytes=1e9)
    p = model.predict(c, rates)
    assert p["limit"] == "L1/shared data path" and p["predicted_s"] == pytest.approx(2.0)
    assert p["issue_s"] == pytest.approx(0.5) and p["dram_s"] == pytest.approx(1.0)
    # three blocks on two SMs: the busiest SM runs two of them
    c3 = model.Counts("k", blocks=3, wavefronts=3e9, instructions=0, dram_bytes=0)
    assert model.predict(c3, rates)["predicted_s"] == pytest.approx(2.0)


def test_experiment_predicts_every_measured_kernel(tmp_path):
    path = model.experiment(tmp_path, data=DATA)
    doc = json.loads(path.read_text())
    rows = [r for r in doc["rows"] if r["kind"] == "kernel"]
    matmul = json.loads((DATA / "matmul.json").read_text())["rows"]
    want = {(r["kernel"], r["n"]) for r in matmul if r["kernel"] != "cublas"}
    assert want <= {(r["kernel"], r["n"]) for r in rows}
    for r in rows:
        assert r["ratio"] == pytest.approx(r["predicted_ms"] / r["measured_ms"])
        assert r["miss"] == (abs(r["ratio"] - 1) > model.MISS)
    assert doc["provenance"]["command"].startswith("tilelab")
    assert doc["provenance"]["derived_from"]["device"]


_HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
         '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
         '"Metric Unit","Metric Value"')


def _ncu_row(launch: int, metric: str, unit: str, value: str) -> str:
    return (f'"{launch}","1","python3","h","k","1","7","(32, 32, 1)","(32, 32, 1)","0",'
            f'"9.0","Command line profiler metrics","{metric}","{unit}","{value}"')


NCU_CSV = "\n".join([
    "==PROF== Connected to process 1",
    _HEAD,
    _ncu_row(0, "l1tex__data_pipe_lsu_wavefronts.sum", "", "100,868,680"),
    _ncu_row(0, "sm__cycles_elapsed.avg.per_second", "hz", "2022594454.82"),
    _ncu_row(1, "l1tex__data_pipe_lsu_wavefronts.sum", "", "55,140,363"),
]) + "\n"


def test_ncu_csv_is_read_per_launch_with_dotless_columns():
    from tilelab.experiments import counters

    launches = counters.parse(NCU_CSV)
    assert len(launches) == 2
    assert launches[0]["l1tex__data_pipe_lsu_wavefronts_sum"] == 100_868_680
    assert launches[0]["sm__cycles_elapsed_avg_per_second"] == pytest.approx(2.0226e9, rel=1e-4)
    assert launches[1] == {"l1tex__data_pipe_lsu_wavefronts_sum": 55_140_363}


def test_bench_names_a_missing_data_file_without_a_traceback(tmp_path, capsys):
    from tilelab import cli

    assert cli.main(["bench", "model", "--out", str(tmp_path)]) == 2
    assert "device.json is missing" in capsys.readouterr().err


def test_wide_passes_see_the_quad_conflict_of_step_3():
    # step 3: 16 threads of a row read B's tile 32 bytes apart, the other 16 the same:
    # each quarter-warp's 8 chunks fall in 4 bank quads, 2 passes each, 4 quarters
    assert model.wide_passes([t * 8 for t in range(16)] * 2) == 8
    # warp tiling: 4 consecutive chunks, the same every 4 lanes (lanes n and n^4 alike,
    # not paired): one pass per quarter-warp
    assert model.wide_passes([(lane % 4) * 4 for lane in range(32)]) == 4
    # step 4's loads of A: a chunk per 4 lanes, lanes n and n^1 alike: two half-warps
    assert model.wide_passes([(lane // 4) * 4 for lane in range(32)]) == 2
    # a 512-byte run (a float4 row store) needs 4 wavefronts, conflict-free
    assert model.wide_passes([4 * lane for lane in range(32)], load=False) == 4


def test_road_counts_follow_the_geometry():
    c = {k: model.road_counts(k, 4096) for k in ("vec4", "warptile", "dbuf", "async",
                                                    "dbuf_128x256x16_w64x64")}
    n3 = 4096 ** 3 / 32  # warp-wide FFMAs of one product
    assert all(x.ffma == n3 for x in c.values())
    # the warp layout removes step 3's 2-way conflict on B's reads
    assert c["warptile"].wavefronts < c["vec4"].wavefronts
    # two buffers change no count; a larger micro-tile reads less per FFMA
    assert c["dbuf"].wavefronts == c["warptile"].wavefronts
    assert c["dbuf_128x256x16_w64x64"].wavefronts_per_unit < c["dbuf"].wavefronts_per_unit
    assert c["dbuf_128x256x16_w64x64"].blocks == 32 * 16
