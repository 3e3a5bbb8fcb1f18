"""``python -m callgate.cli``."""

from callgate.cli import main

main()
