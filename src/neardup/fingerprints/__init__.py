"""Fingerprints: text and weighted features to 64-bit simhash (bit 63 most significant).

>>> from neardup.fingerprints import Fingerprinter, fingerprint, compute
>>> fingerprint("The quick brown fox jumps over the lazy dog") == fingerprint(
...     "the quick brown fox jumps over the lazy dog!")
True
"""

from neardup.fingerprints.hashes import fnv1a64, hashlittle2, jenkins64
from neardup.fingerprints.simhash import (
    PRESETS,
    Features,
    Fingerprinter,
    compute,
    compute_batch,
    fingerprint,
)

__all__ = [
    "PRESETS",
    "Features",
    "Fingerprinter",
    "compute",
    "compute_batch",
    "fingerprint",
    "fnv1a64",
    "hashlittle2",
    "jenkins64",
]
