"""The device: which backend runs kernels (a GPU through PyCUDA, or the CPU emulator), the
runtime facade over it, and the interleaved timer."""
