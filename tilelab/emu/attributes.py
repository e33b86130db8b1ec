"""PyCUDA's ``function_attribute`` names and what each is for an emulated kernel."""

from __future__ import annotations

import enum


class function_attribute(enum.IntEnum):
    """``drv.function_attribute``: the attributes ``Function.get_attribute`` reads."""

    MAX_THREADS_PER_BLOCK = 0
    SHARED_SIZE_BYTES = 1
    CONST_SIZE_BYTES = 2
    LOCAL_SIZE_BYTES = 3
    NUM_REGS = 4
    PTX_VERSION = 5
    BINARY_VERSION = 6
    CACHE_MODE_CA = 7
    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    PREFERRED_SHARED_MEMORY_CARVEOUT = 9


SETTABLE = (function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
            function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT)


class func_cache(enum.IntEnum):
    """``drv.func_cache``: accepted by ``Function.set_cache_config`` (no effect here)."""

    PREFER_NONE = 0
    PREFER_SHARED = 1
    PREFER_L1 = 2
    PREFER_EQUAL = 3
