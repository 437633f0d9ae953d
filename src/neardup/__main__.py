"""``python -m neardup``: the ``neardup`` command."""

from neardup.cli.main import main

if __name__ == "__main__":
    main()
