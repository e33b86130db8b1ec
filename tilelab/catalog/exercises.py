"""The exercise registry: one declarative spec per graded kernel.

Notebooks, the grader, the command line and the book all read these specs. Speed gates
are defaults for a fresh course; ``tilelab calibrate`` re-derives them on the grading GPU
between the slowest correct variant and the fastest lesson-skipping one
(:mod:`tilelab.catalog.variants`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tilelab.catalog.problems import Launch, Problem, Shape
from tilelab.catalog.reference import KERNELS, KernelRef

# The GPU the default gates were calibrated on (`tilelab calibrate`): the grading GPU. A
# speed verdict on any other GPU is advisory.
GRADING_GPU = "NVIDIA H100 80GB HBM3"

# The last shapes reach well past every bound a kernel could hard-code: K of 17 tiles of 32
# (a K loop that stops early), M past 1024 and 200 (a `row % 200`, an early return for a
# large M), N past 1024; all rectangular, none a multiple of a tile.
MATMUL_SHAPES: tuple[Shape, ...] = (
    (1, 1, 1),
    (37, 53, 29),
    (64, 64, 64),
    (100, 30, 70),
    (33, 129, 65),
    (128, 96, 160),
    (333, 290, 517),
    (1030, 33, 40),
    (36, 1050, 44),
)
TRANSPOSE_SHAPES: tuple[Shape, ...] = (
    (1, 1), (33, 65), (64, 64), (100, 37), (31, 300), (256, 128), (1100, 37), (45, 1300),
    (517, 333),
)

MATMUL_SIGNATURE = (
    "__global__ void {name}(const float* A, const float* B, float* C, int M, int N, int K)"
)
TRANSPOSE_SIGNATURE = "__global__ void {name}(const float* in, float* out, int rows, int cols)"


@dataclass(frozen=True)
class Exercise:
    """One graded kernel: what to write, how it is launched, checked and gated."""

    id: str
    assignment: str
    title: str
    kernel: str
    signature: str
    reference: KernelRef  # the instructor's solution (same name, signature and launch)
    baseline: KernelRef  # what the speed gate measures against
    speed_shape: Shape
    gate: float  # minimum speedup over the baseline on a GPU
    gate_reason: str
    chapter: str
    shapes: tuple[Shape, ...] = field(default=MATMUL_SHAPES)
    max_bank_degree: float | None = None  # on the emulator: graded by conflicts, not time
    # a kernel that skips the lesson yet beats the baseline: the speed gate also requires
    # beating it (the padded matmul's unpadded baseline is slower than not tiling at all)
    must_beat: KernelRef | None = None
    reuses_tiles: bool = False  # the lesson is tile reuse: the emulator names a kernel without
    points_correct: float = 3.0
    points_speed: float = 2.0
    optional: bool = False  # a stretch exercise: not needed to complete the course

    @property
    def problem(self) -> Problem:
        return self.reference.problem

    @property
    def launch(self) -> Launch:
        return self.reference.launch

    def with_gate(self, gate: float, reason: str) -> Exercise:
        return replace(self, gate=gate, gate_reason=reason)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "assignment": self.assignment,
            "title": self.title,
            "kernel": self.kernel,
            "signature": self.signature,
            "launch": self.launch.describe(),
            "block": list(self.launch.block),
            "shapes": [list(s) for s in self.shapes],
            "speed_shape": list(self.speed_shape),
            "baseline": self.baseline.label,
            "gate": self.gate,
            "gate_reason": self.gate_reason,
            "max_bank_degree": self.max_bank_degree,
            "points": {"correctness": self.points_correct, "speed": self.points_speed},
            "chapter": self.chapter,
            "optional": self.optional,
        }


_EXERCISES = (
    Exercise(
        id="naive",
        assignment="01-naive",
        title="Naive matrix multiply, one thread per element of C",
        kernel="matmul_naive",
        signature=MATMUL_SIGNATURE.format(name="matmul_naive"),
        reference=KERNELS["naive"],
        baseline=KERNELS["naive_xrow"],
        speed_shape=(2048, 2048, 2048),
        gate=2.3,
        gate_reason=(
            "Coalescing is the lesson: with threadIdx.x along columns every warp reads and "
            "writes whole 128-byte lines. The gate lies between the correct variants and the "
            "row-walking kernel under this exercise's name; the instructors' page shows the "
            "measured variants and margins (book/data/calibration.json, written by `tilelab "
            "calibrate`)."
        ),
        chapter="book/naive",
    ),
    Exercise(
        id="tiled",
        assignment="02-tiled",
        title="Tiled matrix multiply through shared memory (TILE 32)",
        kernel="matmul_tiled",
        signature=MATMUL_SIGNATURE.format(name="matmul_tiled"),
        reference=KERNELS["tiled32"],
        baseline=KERNELS["naive"],
        speed_shape=(2048, 2048, 2048),
        gate=1.2,
        reuses_tiles=True,
        gate_reason=(
            "Tiling is the lesson. Large L1/L2 caches give the naive kernel much of the reuse "
            "that tiling makes explicit, so the gain is modest on recent GPUs; the gate lies "
            "between the slowest correct tiled variant (tile 16, padded tiles, other loop "
            "orders) and an untiled kernel launched with the tiled geometry; the instructors' "
            "page shows the measured variants and margins (book/data/calibration.json, written "
            "by `tilelab calibrate`)."
        ),
        chapter="book/tiling",
    ),
    Exercise(
        id="transpose_shared",
        assignment="03-padded",
        title="Transpose through a 32x32 shared tile",
        kernel="transpose_shared",
        signature=TRANSPOSE_SIGNATURE.format(name="transpose_shared"),
        reference=KERNELS["transpose_shared"],
        baseline=KERNELS["transpose_naive"],
        speed_shape=(4096, 4096),
        shapes=TRANSPOSE_SHAPES,
        gate=1.5,
        gate_reason=(
            "Staging through shared memory makes both global accesses coalesced. On an H100 a "
            "kernel with no tile that reads with a stride and writes coalesced is as fast as "
            "the unpadded shared tile, so speed alone cannot grade the lesson: the grader also "
            "asks that every global load and store be coalesced (the emulator's traffic count);"
            " the instructors' page shows the measured variants and margins "
            "(book/data/calibration.json, written by `tilelab calibrate`)."
        ),
        chapter="book/banks",
    ),
    Exercise(
        id="transpose_padded",
        assignment="03-padded",
        title="Transpose through a padded [32][33] shared tile",
        kernel="transpose_padded",
        signature=TRANSPOSE_SIGNATURE.format(name="transpose_padded"),
        reference=KERNELS["transpose_padded"],
        baseline=KERNELS["transpose_shared"],
        speed_shape=(4096, 4096),
        shapes=TRANSPOSE_SHAPES,
        gate=1.3,
        gate_reason=(
            "Padding removes the 32-way conflict of the column read. The gate separates the "
            "padded variants from the unpadded kernel under this exercise's name. On the "
            "emulator the gate is the bank-conflict degree; the instructors' page shows the "
            "measured variants and margins (book/data/calibration.json, written by `tilelab "
            "calibrate`)."
        ),
        chapter="book/banks",
        max_bank_degree=1.1,
    ),
    Exercise(
        id="matmul_at_padded",
        assignment="03-padded",
        title="Tiled matmul with A's tile stored transposed, fixed by padding",
        kernel="matmul_tiled_at",
        signature=MATMUL_SIGNATURE.format(name="matmul_tiled_at"),
        reference=KERNELS["tiled32_at_padded"],
        baseline=KERNELS["tiled32_at"],
        speed_shape=(2048, 2048, 2048),
        gate=1.3,
        gate_reason=(
            "Storing A's tile transposed makes every store a 32-way conflict; padding fixes it."
            " The gate separates the padded variants from the unpadded kernel, and from a plain"
            " naive kernel, which beats the unpadded baseline on an H100. On the emulator the "
            "gate is the bank-conflict degree; the instructors' page shows the measured "
            "variants and margins (book/data/calibration.json, written by `tilelab calibrate`)."
        ),
        chapter="book/banks",
        max_bank_degree=1.1,
        must_beat=KERNELS["naive"],
        reuses_tiles=True,
    ),
    Exercise(
        id="regblock",
        assignment="04-regblock",
        title="Register blocking: a 4x4 micro-tile of C per thread (optional stretch)",
        kernel="matmul_regblock",
        signature=MATMUL_SIGNATURE.format(name="matmul_regblock"),
        reference=KERNELS["regblock64"],
        baseline=KERNELS["tiled32"],
        speed_shape=(2048, 2048, 2048),
        gate=1.5,
        gate_reason=(
            "Register blocking is the lesson: each thread keeps a 4x4 micro-tile of C in "
            "registers, so 8 shared loads feed 16 FMAs. The baseline is the course's tiled "
            "kernel (TILE 32); the lesson-skipping kernel is that tiled kernel resubmitted "
            "under this exercise's launch; the instructors' page shows the measured variants "
            "and margins (book/data/calibration.json, written by `tilelab calibrate`)."
        ),
        chapter="book/cublas",
        optional=True,
    ),
)

EXERCISES: dict[str, Exercise] = {e.id: e for e in _EXERCISES}
ASSIGNMENTS: dict[str, tuple[str, ...]] = {}
for _e in _EXERCISES:
    ASSIGNMENTS.setdefault(_e.assignment, ())
    ASSIGNMENTS[_e.assignment] += (_e.id,)


def get(exercise_id: str) -> Exercise:
    """The exercise with this id; a clear error listing the ids otherwise."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(
            f"no exercise {exercise_id!r}; the exercises are: {', '.join(EXERCISES)}"
        ) from None
