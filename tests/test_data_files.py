"""The book's measured data files: each carries its provenance and well-formed rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelab.experiments import datafile

DATA = Path(__file__).resolve().parents[1] / "book" / "data"
FILES = sorted(DATA.glob("*.json"))
GPU_FIELDS = ("gpu", "driver", "cuda_driver", "pycuda", "date", "command", "method")


def test_there_is_measured_data():
    assert FILES, "book/data has no data files; run `tilelab bench` on a GPU"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_data_file_has_provenance_and_rows(path):
    doc = json.loads(path.read_text())
    assert doc["experiment"] == path.stem
    assert doc["rows"], "no rows"
    prov = doc["provenance"]
    assert prov["command"].startswith(("tilelab bench ", "tilelab calibrate "))
    if prov.get("gpu") is not None:
        for field in GPU_FIELDS:
            assert prov.get(field), f"{path.name}: provenance lacks {field}"
    elif prov["method"].startswith("static"):  # compiled, never run: no GPU, no emulator
        assert prov.get("backend") == "compiler only" and prov.get("nvcc")
    else:
        assert prov.get("backend") == "CPU emulator"
    for col in doc["columns"]:
        assert any(col in row for row in doc["rows"]), f"column {col} in no row"


def test_write_records_provenance_without_a_gpu(tmp_path):
    path = datafile.write(tmp_path, "demo", "t", "d", {"x": ""}, [{"x": 1}], gpu=False,
                          method="m")
    doc = json.loads(path.read_text())
    assert doc["provenance"]["backend"] == "CPU emulator"
    assert doc["provenance"]["method"] == "m" and doc["rows"] == [{"x": 1}]


@pytest.mark.parametrize("argv,command", [
    (["bench", "device", "--out", "/scratch/x/data"], "tilelab bench device --out book/data"),
    (["bench", "matmul", "--out=/tmp/d"], "tilelab bench matmul --out book/data"),
    (["bench", "sass"], "tilelab bench sass --out book/data"),
    (["calibrate", "--write", "/scratch/g.json", "--out", "/scratch/data"],
     "tilelab calibrate --write autograder/gates.json --out book/data"),
])
def test_provenance_records_the_command_as_a_reader_runs_it(argv, command):
    from tilelab.experiments.provenance import reader_command

    assert reader_command(argv) == command


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_recorded_command_writes_to_the_books_data_folder(path):
    command = json.loads(path.read_text())["provenance"]["command"]
    assert command.endswith(" --out book/data") and command.count("--out") == 1
