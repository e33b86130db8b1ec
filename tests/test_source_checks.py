"""Sources are vetted before any compiler sees them."""

from __future__ import annotations

import pytest

from tilelab.source_checks import MAX_SOURCE_BYTES, SourceRejected, validate_source

OK = "__global__ void k(float* a) { a[0] = 1.0f; }\n"


def test_plain_source_passes():
    assert validate_source(OK) == OK
    assert validate_source(OK.encode()) == OK
    assert validate_source("#include <stdio.h>\n" + OK)


@pytest.mark.parametrize("inc", ['"/etc/passwd"', "</etc/passwd>", '"../solutions/x.cu"',
                                 "<iostream>"])
def test_includes_outside_the_allowlist_are_rejected_without_reading(inc):
    with pytest.raises(SourceRejected, match="line 2: #include") as e:
        validate_source("// kernel\n#include " + inc + "\n" + OK)
    assert "root:" not in str(e.value)


def test_non_utf8_and_nul_and_empty_and_huge():
    with pytest.raises(SourceRejected, match="not valid UTF-8"):
        validate_source(b"__global__ void k() {}\xff\xfe")
    with pytest.raises(SourceRejected, match="NUL"):
        validate_source(OK + "\x00")
    with pytest.raises(SourceRejected, match="empty"):
        validate_source("  \n")
    with pytest.raises(SourceRejected, match="more than"):
        validate_source(b"/" * (MAX_SOURCE_BYTES + 1))
