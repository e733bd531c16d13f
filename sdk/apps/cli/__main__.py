"""``python -m pairedge.apps.cli``: the same as the ``pairedge`` console script."""

from pairedge.apps.cli import main

main()
