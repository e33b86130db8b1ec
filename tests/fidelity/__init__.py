"""The emulator held against a GPU: generated kernels (``generate``), how a case is run
(``runner``) and judged (``outcome``), the minimiser of disagreements (``minimize``) and the
regression cases kept with the GPU's answers (``regressions.json``)."""
