"""``python -m pairedge.cli``: the same as the ``pairedge`` console script."""

from pairedge.cli import main

main()
