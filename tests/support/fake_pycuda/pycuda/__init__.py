"""A stand-in for PyCUDA backed by the CPU emulator, for testing code written for a GPU
(the differential harness's GPU side) on a machine without one: ``compiler.compile`` gives
a "cubin" that holds the source, ``driver.module_from_buffer`` builds it with the emulator,
and the emulator's errors come out as PyCUDA's, in CUDA's words."""

VERSION_TEXT = "fake (tilelab.emu)"
