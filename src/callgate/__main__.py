"""``python -m callgate``: the ``callgate`` command."""

from callgate.cli import main

if __name__ == "__main__":
    main()
