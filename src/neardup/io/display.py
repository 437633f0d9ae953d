"""How numbers read in messages and reports: counts with the right plural, sizes in decimal
units."""

from __future__ import annotations

__all__ = ["plural", "saved", "size"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 cluster"``, ``"2 clusters"``, ``"1,200 documents"`` (``many``: an irregular
    plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def size(n: float) -> str:
    """Bytes in decimal units: ``"512 B"``, ``"1.4 MB"``; negative sizes keep their sign."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1000
    return f"{sign}{n:.1f} TB"


def saved(bytes_in: int, bytes_out: int) -> str:
    """``"161.3 kB saved"``, or ``"12 B larger"`` when the output outgrew the input (a newline
    added after a last line, a less compressed output)."""
    d = bytes_in - bytes_out
    return f"{size(d)} saved" if d >= 0 else f"{size(-d)} larger"
