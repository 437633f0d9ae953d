"""Exceptions raised for bad user input (the CLI turns them into one-line messages)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input data: names the source, the line/record (1-based) and what was wrong."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")
