"""``sass.json``: shared loads in the compiled matmul kernels (nvcc and cuobjdump)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tilelab.catalog.reference import KERNELS
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write

#: an instruction's 64-bit encoding, which cuobjdump prints as a comment after it
_ENCODING = re.compile(r"/\*\s*0x[0-9a-f]+\s*\*/")
OPCODE = re.compile(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\d\s+)?([A-Z0-9_.]+)", re.M)


def run(rt: Runtime | None, out: Path, arch: str = "sm_90") -> Path:
    """Count shared loads in the compiled inner loops (needs nvcc and cuobjdump)."""
    if not shutil.which("cuobjdump"):
        raise RuntimeError("the sass experiment needs nvcc and cuobjdump on PATH")
    rows = []
    keys = ("naive", "tiled16", "tiled32", "tiled32_padded", "tiled32_at", "tiled32_at_padded")
    for key in keys:
        text = sass_of(KERNELS[key].source(), arch)
        ops = OPCODE.findall(text)
        lds = [o for o in ops if o.startswith("LDS")]
        excerpt = [_ENCODING.sub("", ln).strip() for ln in text.splitlines()
                   if "LDS" in ln or "FFMA" in ln][:12]
        rows.append(
            {
                "kernel": key,
                "arch": arch,
                "instructions": len(ops),
                "lds_total": len(lds),
                "lds_128": sum(o.startswith("LDS.128") for o in lds),
                "lds_64": sum(o.startswith("LDS.64") for o in lds),
                "lds_32": sum(o in ("LDS", "LDS.U", "LDS.32") for o in lds),
                "ffma": sum(o.startswith("FFMA") for o in ops),
                "excerpt": "\n".join(excerpt),
            }
        )
    return write(
        out,
        "sass",
        "Shared loads in the compiled tiled kernels",
        f"nvcc -cubin -arch={arch} and cuobjdump -sass; instruction counts of the whole kernel.",
        {
            "kernel": "",
            "lds_total": "",
            "lds_128": "",
            "lds_32": "",
            "ffma": "",
            "instructions": "",
        },
        rows,
        gpu=rt is not None,
        method="static: compiled code, no timing",
        kernels={k: KERNELS[k].source() for k in keys},
    )


def sass_of(source: str, arch: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp, "k.cu"), Path(tmp, "k.cubin")
        cu.write_text('extern "C" {\n' + source + "\n}\n", encoding="utf-8")
        subprocess.run(
            ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-o", str(cubin), str(cu)],
            check=True,
            capture_output=True,
        )
        return subprocess.run(
            ["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True
        ).stdout
