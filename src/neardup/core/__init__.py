"""The engine: fingerprint bits, table layouts, numba kernels, exact Hamming search, decisions.

Nothing here reads files, prints or exits; everything takes and returns arrays.
"""
