"""`python -m hil` is the `hil` command."""

from hil.cli import entry

entry()
