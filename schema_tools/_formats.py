"""The `format` checks `validate` applies (no optional jsonschema extras needed).

Checked: ``email``, ``date``, ``date-time`` (RFC 3339), ``uri`` (RFC 3986, absolute) and ``regex`` (compiles
with RE2, the engine `validate` matches patterns with; see `schema_tools._re2`). Every other format is an
annotation only, as Draft 2020-12 allows.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from jsonschema import FormatChecker

from schema_tools._re2 import regex_error

__all__ = ["FORMAT_CHECKER"]

_EMAIL = re.compile(r"[^@\s]+@[^@\s.][^@\s]*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_DATE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|\\^`]*", re.ASCII)
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")

FORMAT_CHECKER = FormatChecker(formats=())


@FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    return not isinstance(value, str) or _EMAIL.fullmatch(value) is not None


@FORMAT_CHECKER.checks("date")
def _is_date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return _DATE.fullmatch(value) is not None and _parses(dt.date.fromisoformat, value)


@FORMAT_CHECKER.checks("date-time")
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    day, clock, fraction, offset = match.groups()
    clock = clock[:6] + "59" if clock.endswith(":60") else clock  # RFC 3339 allows a leap second
    offset = "+00:00" if offset in ("Z", "z") else offset
    return _parses(dt.datetime.fromisoformat, f"{day}T{clock}{fraction or ''}{offset}")


@FORMAT_CHECKER.checks("uri")
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return _URI.fullmatch(value) is not None and _BAD_PERCENT.search(value) is None


@FORMAT_CHECKER.checks("regex")
def _is_regex(value: object) -> bool:
    return not isinstance(value, str) or regex_error(value) is None


def _parses(parse: Callable[[str], object], value: str) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True
