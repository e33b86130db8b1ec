"""The course's data: exercises (the registry), problems and their shapes, reference kernels
and the calibration variants. Imports nothing of tilelab above the device layer."""
