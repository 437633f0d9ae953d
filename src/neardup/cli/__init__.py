"""Command-line entry points: the seed tools and the ``neardup`` command."""
