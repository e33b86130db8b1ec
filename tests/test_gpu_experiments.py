"""The microbenchmark experiments of chapter 5 write well-formed data files on a GPU."""

from __future__ import annotations

import json

import pytest

from tilelab.experiments import runner


@pytest.mark.gpu
def test_microbenchmarks_write_their_data_files(tmp_path, monkeypatch):
    names = ["shared_bw", "divergence", "waves", "latency"]
    # the command line as `tilelab bench` has it: the provenance records it as a reader runs it
    monkeypatch.setattr("sys.argv", ["tilelab", "bench", *names, "--out", str(tmp_path)])
    paths = runner.run(names, tmp_path)
    docs = {p.stem: json.loads(p.read_text()) for p in paths}
    assert set(docs) == set(names)
    for doc in docs.values():
        assert doc["provenance"]["command"].endswith("--out book/data")
        assert doc["provenance"]["gpu"]
    div = docs["divergence"]["rows"]
    assert {(r["paths"], r["by_lane"]) for r in div} == {
        (p, b) for p in (1, 2, 4, 8, 16, 32) for b in (True, False)}
    waves = {r["blocks"]: r for r in docs["waves"]["rows"]}
    one = min(b for b, r in waves.items() if r["waves"] == 1.0)
    assert waves[one + 1]["full_waves"] == 2
    kinds = [r["kind"] for r in docs["latency"]["rows"]]
    assert kinds.count("latency") == 1 and kinds.count("stream") == 4
    assert docs["shared_bw"]["rows"][0]["bytes_per_clock_per_sm"] > 0
