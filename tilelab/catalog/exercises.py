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
# (a K loop that stops early), with M past K's remainder in every tile of up to 128 (a load
# guarded by the wrong index reads past A's end in the last rows) and N short of it; M past
# 1024 and 200 (a `row % 200`, an early return for a large M), N past 1024; all
# rectangular, none a multiple of a tile. No larger than that asks: the emulator's check
# waits for its largest launch (205 x 162 keeps 333 x 290's remainders modulo 128 at a
# third of its work).
MATMUL_SHAPES: tuple[Shape, ...] = (
    (1, 1, 1),
    (37, 53, 29),
    (64, 64, 64),
    (100, 30, 70),
    (33, 129, 65),
    (128, 96, 160),
    (205, 162, 517),
    (1030, 33, 40),
    (36, 1050, 44),
)
TRANSPOSE_SHAPES: tuple[Shape, ...] = (
    (1, 1), (33, 65), (64, 64), (100, 37), (31, 300), (256, 128), (1100, 37), (45, 1300),
    (517, 333),
)

# The small steps: 2-D shapes for the elementwise add, 1-D lengths for the reduction and
# the stencil (none a multiple of 256 but two, tiny ones, one past a block by one), whole
# tiles only for the tiled loop's stage (its edges are the next step).
ADD2D_SHAPES: tuple[Shape, ...] = (
    (1, 1), (15, 17), (16, 16), (33, 65), (100, 37), (31, 300), (1100, 37), (45, 1300),
)
LINE_SHAPES: tuple[Shape, ...] = (
    (1,), (31,), (256,), (257,), (1000,), (4099,), (20001,),
)
WHOLE_TILE_SHAPES: tuple[Shape, ...] = (
    (32, 32, 32), (64, 32, 96), (32, 96, 64), (96, 64, 160), (64, 32, 576), (1056, 32, 64),
    (32, 1056, 64),
)

MATMUL_SIGNATURE = (
    "__global__ void {name}(const float* A, const float* B, float* C, int M, int N, int K)"
)
TRANSPOSE_SIGNATURE = "__global__ void {name}(const float* in, float* out, int rows, int cols)"
ADD2D_SIGNATURE = ("__global__ void add2d(const float* A, const float* B, float* C, int M, "
                   "int N)")
LINE_SIGNATURE = "__global__ void {name}(const float* x, float* {out}, int n)"

#: the gate of a step graded for correctness only (it has no speed test)
CORRECTNESS_ONLY = (
    "This step is graded for correctness only: its lesson is an index, a guard or a barrier, "
    "which a wrong output or the emulator's race check shows, not a time."
)


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
    #: the lesson is a shared tile: on a GPU, a kernel whose counters show no shared-memory
    #: load and store earns no speed points, however fast
    needs_shared: bool = False
    reuses_tiles: bool = False  # the lesson is tile reuse: the emulator names a kernel without
    points_correct: float = 3.0
    points_speed: float = 2.0
    optional: bool = False  # a stretch exercise: not needed to complete the course
    teaches: str = ""  # the one idea the step asks for (the instructors' page shows it)
    #: the name the kernel cell assigns the source to (the released notebook's, which its
    #: checks and hidden tests pass to the grader)
    variable: str = "KERNEL"

    @property
    def speed_graded(self) -> bool:
        """Whether the step has a speed test (a gate); False: graded for correctness only."""
        return self.points_speed > 0

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
            "speed_graded": self.speed_graded,
            "teaches": self.teaches,
            "variable": self.variable,
        }


def _step(id: str, assignment: str, title: str, ref: str, signature: str, shapes: tuple,
          chapter: str, teaches: str, points: float = 2.0, **kw) -> Exercise:
    """A step graded for correctness only: the gate's baseline is its own reference."""
    r = KERNELS[ref]
    return Exercise(id=id, assignment=assignment, title=title, kernel=r.name,
                    signature=signature, reference=r, baseline=r,
                    speed_shape=shapes[-1], gate=1.0, gate_reason=CORRECTNESS_ONLY,
                    chapter=chapter, shapes=shapes, points_correct=points, points_speed=0.0,
                    teaches=teaches, **kw)


_EXERCISES = (
    _step("add2d", "01-naive", "Add two matrices, one thread per element", "add2d",
          ADD2D_SIGNATURE, ADD2D_SHAPES, "book/naive",
          "2-D indexing (row from y, column from x) and the guard for a grid that overhangs "
          "the matrix"),
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
        teaches="coalescing: threadIdx.x walks the columns, so a warp reads and writes "
                "consecutive addresses",
    ),
    _step("block_sum", "02-tiled", "Sum each block's 256 values in shared memory",
          "block_sum", LINE_SIGNATURE.format(name="block_sum", out="sums"), LINE_SHAPES,
          "book/tiling",
          "shared memory shared by a block, and a barrier between every step of a tree"),
    _step("stencil", "02-tiled", "A 5-point stencil with its halo in shared memory",
          "stencil", LINE_SIGNATURE.format(name="stencil", out="y"), LINE_SHAPES,
          "book/tiling",
          "staging a block's values and its halo in shared memory, each global value "
          "loaded once"),
    _step("tile_pair", "02-tiled", "Tiled multiply, stage 1: load one tile pair",
          "tile_pair", MATMUL_SIGNATURE.format(name="tile_pair"), MATMUL_SHAPES,
          "book/tiling",
          "which element of A's and B's tile each thread loads, with zeros outside"),
    _step("first_tile", "02-tiled", "Tiled multiply, stage 2: the barrier and one tile's "
          "partial product", "first_tile", MATMUL_SIGNATURE.format(name="first_tile"),
          MATMUL_SHAPES, "book/tiling",
          "the first barrier: a thread reads tile elements other threads stored"),
    _step("tiled_loop", "02-tiled", "Tiled multiply, stage 3: the loop over whole tiles",
          "tiled_loop", MATMUL_SIGNATURE.format(name="matmul_tiled_loop"),
          WHOLE_TILE_SHAPES, "book/tiling",
          "the loop over K's tiles and the second barrier, before the next loads overwrite "
          "the tiles"),
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
        teaches="the whole tiled kernel: the edges of shapes that are not whole tiles, and "
                "the speed of reusing each tile 32 times",
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
        needs_shared=True,
        gate_reason=(
            "Staging through shared memory makes both global accesses coalesced. A kernel "
            "with no tile that reads with a stride and writes coalesced is about as fast as "
            "the unpadded shared tile, so speed alone cannot grade the lesson: on a GPU the "
            "speed points also need the GPU's own counters (Nsight Compute) to show "
            "shared-memory loads and stores and global accesses that move no more sectors "
            "than coalesced ones; the instructors' page shows the measured variants and "
            "margins (book/data/calibration.json, written by `tilelab calibrate`)."
        ),
        chapter="book/banks",
        teaches="a shared tile turns a strided global access into two coalesced ones",
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
        teaches="the bank-conflict fix: a padded row moves each column into 32 banks",
    ),
    _step("matmul_at", "03-padded", "Tiled matmul with A's tile stored transposed",
          "tiled32_at", MATMUL_SIGNATURE.format(name="matmul_tiled_at"), MATMUL_SHAPES,
          "book/banks",
          "a transposed store into shared memory (As[tx][ty]) and reading it back "
          "transposed; the emulator shows its 32-way conflict"),
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
        teaches="padding a tile that a warp stores down a column",
    ),
    Exercise(
        id="regblock_1d",
        assignment="04-regblock",
        title="Register blocking in 1-D: 8 elements of a column of C per thread",
        kernel="matmul_regblock_1d",
        signature=MATMUL_SIGNATURE.format(name="matmul_regblock_1d"),
        reference=KERNELS["regblock_1d"],
        baseline=KERNELS["tiled32"],
        speed_shape=(2048, 2048, 2048),
        gate=1.3,
        gate_reason=(
            "Register blocking is the lesson: one value of B's tile in a register serves 8 "
            "multiply-adds. The baseline is the course's tiled kernel (TILE 32); the "
            "lesson-skipping kernel computes its 8 elements straight from global memory; the "
            "instructors' page shows the measured variants and margins "
            "(book/data/calibration.json, written by `tilelab calibrate`)."
        ),
        chapter="book/cublas",
        optional=True,
        reuses_tiles=True,
        teaches="register blocking in one dimension: a value loaded once into a register, "
                "used 8 times",
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
        teaches="register blocking in two dimensions: a 4x4 micro-tile, 8 shared loads "
                "for 16 multiply-adds",
    ),
    _step("vec4", "04-regblock", "float4 loads from global and shared memory (optional)",
          "vec4", MATMUL_SIGNATURE.format(name="matmul_vec4"), MATMUL_SHAPES, "book/cublas",
          "16-byte loads: one float4 moves four values, with a scalar path at the edges",
          optional=True),
)

#: each step's kernel-cell name, where it is not KERNEL (the main kernel of an assignment)
_VARIABLES = {
    "add2d": "ADD2D", "block_sum": "BLOCK_SUM", "stencil": "STENCIL", "tile_pair": "TILE_PAIR",
    "first_tile": "FIRST_TILE", "tiled_loop": "TILED_LOOP",
    "transpose_shared": "TRANSPOSE_SHARED", "transpose_padded": "TRANSPOSE_PADDED",
    "matmul_at": "MATMUL_AT_T", "matmul_at_padded": "MATMUL_AT", "regblock_1d": "REGBLOCK_1D",
    "vec4": "VEC4",
}
_EXERCISES = tuple(replace(e, variable=_VARIABLES.get(e.id, e.variable)) for e in _EXERCISES)
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
