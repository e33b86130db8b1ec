"""What one grading worker may use: the worker sets these on itself, the sandbox names
them when a worker dies of one."""

MEMORY_LIMIT = 6 * 1024**3  # address space of an emulator grading process
FILE_LIMIT = 64 * 1024**2  # any file the worker writes, its stderr included
