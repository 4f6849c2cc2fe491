"""One exception hierarchy for the whole project.

`HilError` is the base. Mistakes of the caller (bad arguments, bad files) are
`ValueError`s as well; failures of the device or the link are `OSError`s as
well, so code that already catches those keeps working. The wire-protocol package keeps its own
root (`ProtocolLibError`: it imports nothing of hil); `EXPECTED` names both, and `message` words
either for a user — the two places that report errors (the CLI's `main`, the loop's entry) use them.
"""

from __future__ import annotations

from firmware_protocol.protocol_errors import ProtocolLibError


class HilError(Exception):
    """Base of every error raised by hil."""


class ConfigError(HilError, ValueError):
    """A configuration or data file is invalid (message names the file and the key)."""


class InputError(HilError, ValueError):
    """An argument is invalid: wrong shape, not finite, unknown name, out of range."""


class UnreachableError(HilError, ValueError):
    """A requested target cannot be reached; the message names the bound that failed."""


EXPECTED = (HilError, ProtocolLibError)
"""Failures a user can act on (bad input, a port that cannot be opened, a board that does not
answer): reported by their message, never by a traceback."""


def message(e: BaseException) -> str:
    """An expected error's text for a user: an OSError's own words without "[Errno N]"."""
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def did_you_mean(word, options, most: int = 3) -> str:
    """" (did you mean X?)" for the option closest to a mistyped `word` (or a few), "" when none is
    close: what every "unknown …" message adds."""
    import difflib   # lazy: only a mistake needs it

    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=most, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(close)}?)"
