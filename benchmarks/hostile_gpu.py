"""Grade the replaying and lesson-skipping kernels of tests/fixtures/submissions on this GPU,
in the grading sandbox, as a class run would; print each one's points, speedup and the
seconds of each grading step ("counters": Nsight Compute's run, part of "speed"), and write every
verdict to a JSON file. Each of these kernels must earn at most its correctness points.

    python benchmarks/hostile_gpu.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tilelab.grading.sandbox import grade_source

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "submissions"
#: fixture -> exercise: replaying kernels first, then kernels that skip the lesson, then a
#: kernel racing in global memory
CASES = {
    "tiled-replay_poison_check": "tiled",
    "tiled-replay_memo": "tiled",
    "transpose_padded-replay_skip_tiles": "transpose_padded",
    "transpose_padded-unpadded": "transpose_padded",
    "transpose_shared-strided_reads": "transpose_shared",
    "matmul_at_padded-unpadded": "matmul_at_padded",
    "tiled-untiled": "tiled",
    "naive-uncoalesced": "naive",
    "naive-global_race": "naive",  # right on a GPU by luck; wrong under varied orders
}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", type=Path, required=True)
    a = p.parse_args()
    rows, worst = [], 0.0
    for fixture, exercise in CASES.items():
        t0 = time.perf_counter()
        v = grade_source(exercise, (FIXTURES / f"{fixture}.cu").read_bytes(), backend_name="gpu")
        wall = time.perf_counter() - t0
        rows.append({"fixture": fixture, "wall_s": wall, "verdict": v.to_dict()})
        over = v.points - v.max_points_correct
        worst = max(worst, over)
        print(f"{fixture:36} {v.points:g}/{v.max_points_correct + v.max_points_speed:g}  "
              f"speedup={v.speedup}  wall={wall:.1f}s  steps={v.step_seconds}")
        for m in v.messages[-2:]:
            print("    -", m[:220])
    a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print("every kernel at most its correctness points:", "yes" if worst <= 0 else "NO")
    return 0 if worst <= 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
