import os
import sys

from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))

# The first example of a test may compile or load numba kernels, and CI machines are shared:
# correctness, not per-example speed, is what these tests measure.
settings.register_profile("neardup", deadline=None)
settings.load_profile("neardup")
