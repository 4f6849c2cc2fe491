from hil.cli import entry

entry()
