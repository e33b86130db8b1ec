"""Whether a folder of data files describes one GPU and today's code.

The book reads many data files; a rerun of some of them on another GPU, or a kernel edited
since they were measured, would leave pages that mix two machines or describe code that no
longer exists. :func:`problems` lists what is wrong with a folder: files that name
different GPUs (a file computed without a GPU names the one its inputs came from), files
without the code's revision, and kernels whose source digest (comments and whitespace
aside: :func:`tilelab.experiments.provenance.kernel_digest`) is not that of the code now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tilelab.catalog import road
from tilelab.catalog.reference import KERNELS, kernel_file
from tilelab.experiments.provenance import kernel_digest


def current_source(key: str) -> str | None:
    """Today's source of a kernel as data files name it: ``file:NAME.cu`` (a kernel file),
    a step or configuration of the road, or a course kernel; None for an unknown key."""
    if key.startswith("file:"):
        try:
            return kernel_file(key[len("file:"):])
        except (FileNotFoundError, OSError):
            return None
    refs = road.kernel_refs()
    if key in refs:
        return refs[key].source()
    if key in KERNELS:
        return KERNELS[key].source()
    return None


def gpu_of(prov: dict[str, Any]) -> str | None:
    """The GPU a data file describes: the one it was measured on, or for a file computed
    without a GPU, the one its inputs were measured on (None: no GPU is involved)."""
    return prov.get("gpu") or prov.get("describes_gpu")


def problems(folder: Path) -> list[str]:
    """What keeps the data files in ``folder`` from describing one GPU and today's code."""
    found: list[str] = []
    gpus: dict[str, list[str]] = {}
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        return [f"{folder}: no data files"]
    for path in files:
        try:
            prov = json.loads(path.read_text(encoding="utf-8")).get("provenance") or {}
        except (OSError, json.JSONDecodeError) as exc:
            found.append(f"{path.name}: not readable ({exc})")
            continue
        gpu = gpu_of(prov)
        if gpu:
            gpus.setdefault(gpu, []).append(path.stem)
        if not prov.get("revision") and not prov.get("code_digest"):
            found.append(f"{path.name}: names no code revision (measured before the bench "
                         "recorded one): measure it again")
        if prov.get("dirty"):
            found.append(f"{path.name}: measured from a checkout with uncommitted changes "
                         f"to {prov.get('revision') or 'its revision'}")
        for key, digest in sorted((prov.get("kernels") or {}).items()):
            now = current_source(key)
            if now is None:
                found.append(f"{path.name}: kernel {key!r} is not in the code any more")
            elif kernel_digest(now) != digest:
                found.append(f"{path.name}: kernel {key!r} changed since it was measured "
                             f"(digest {digest}, now {kernel_digest(now)}): measure it again")
    if len(gpus) > 1:
        which = "; ".join(f"{g}: {', '.join(names)}" for g, names in sorted(gpus.items()))
        found.append(f"the data files describe {len(gpus)} GPUs ({which}): every file of "
                     "the book must come from one GPU (benchmarks/gpu_session.sh OUT book)")
    return found
