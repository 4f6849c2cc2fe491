"""One exception hierarchy for the whole project.

`HilError` is the base. Mistakes of the caller (bad arguments, bad files) are
`ValueError`s as well; failures of the device or the link are `OSError`s as
well, so code that already catches those keeps working.
"""

from __future__ import annotations


class HilError(Exception):
    """Base of every error raised by hil."""


class ConfigError(HilError, ValueError):
    """A configuration or data file is invalid (message names the file and the key)."""


class InputError(HilError, ValueError):
    """An argument is invalid: wrong shape, not finite, unknown name, out of range."""


class UnreachableError(HilError, ValueError):
    """A requested target cannot be reached; the message names the bound that failed."""
