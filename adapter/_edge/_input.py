"""The run input at the edge: read the body, decode, drop unrecognised material, validate, check the version.

The body is read under its size limit as it arrives (parsed off the event loop when large), and what
passes is marked checked (`CheckedInput`).

Everything here happens before a stream opens, so a refusal is an `InputRejected` that the HTTP
layer turns into a 4xx with a JSON body (TRANS-8). What counts as malformed and what is only
unrecognised follows AGUI-RULES IN-1/IN-2 and VER-2..4.
"""

from __future__ import annotations

import json
import logging
import re
from contextlib import aclosing
from typing import Any, Final, get_args

from ag_ui.core import PROTOCOL_VERSION, ContentPart, Message, PartSource, RunAgentInput
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json, to_jsonable_python
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from adapter import _errors as codes
from adapter._collector import COLLECTOR
from adapter._compat import upgrade_parts
from adapter._errors import InputRejected
from adapter._limits import (
    MAX_DEPTH,
    CheckedInput,
    bad_input_id,
    body_depth_and_constants,
    body_depth_exceeds,
    ids_hold,
    repeated_message_id,
)
from adapter._types import JSON

logger = logging.getLogger(__name__)

SUPPORTED_MAJOR: Final = 1
"""The protocol major version this adapter speaks; any other declared major is refused."""

_MAX_ERROR_DETAILS: Final = 20  # bounds the 422 body: pydantic echoes each failing input
_VERSION: Final = re.compile(r"([0-9]+)\.([0-9]+)")  # the spec's two-component grammar; ASCII digits only
_LOGGED_CHARS: Final = 64  # client-chosen strings are truncated in logs and messages
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")  # cheap pre-check; pairs are verified after
_LONG_STRINGS: Final = 8192  # bytes per message above which a body is checked by a parse rather than a search


def parse_run_input(body: bytes) -> CheckedInput:
    """Turn a request body into a `RunAgentInput`, or refuse it.

    Args:
        body: The raw request body, UTF-8 JSON.

    Returns:
        The validated input, with unrecognised messages and content parts removed, marked as checked.

    Raises:
        InputRejected: 422 `INVALID_INPUT` for bad JSON or a malformed known field; 422 `INPUT_TOO_DEEP`
            or `INVALID_ID` for an input over the limits of `adapter._limits`; 400
            `UNSUPPORTED_PROTOCOL_VERSION` for a declared major version other than 1.
    """
    too_deep, constants = body_depth_and_constants(body, MAX_DEPTH)  # one scan of a long body for both
    if too_deep:
        raise _too_deep()
    run_input = _validate_json(body, constants) or _validate_checked(body)
    check_protocol_version(run_input.protocol_version)
    check_limits(run_input)
    return CheckedInput(run_input)


def _validate_checked(body: bytes) -> RunAgentInput:
    """Decode by JSON's rules, drop what this version does not know, validate; or refuse with the reason."""
    data = _decode(body)
    try:
        return RunAgentInput.model_validate(sanitize_run_input(data))
    except ValidationError as error:
        message = "The body is not a valid RunAgentInput."
        raise InputRejected(422, codes.INVALID_INPUT, message, _details(error)) from error


def _validate_json(body: bytes, constants: bool | None = None) -> RunAgentInput | None:
    """The common body in one pass of pydantic's JSON parser; None sends it down the checked path.

    That path decides everything this one does not: a body that fails here (bad JSON, a lone
    surrogate, a malformed field, a message or part of an unknown kind to drop), and one with NaN or
    Infinity, which this parser accepts and JSON does not. So a body parsed here is exactly the input
    the checked path would have built (tests/edge/test_input_parse.py). Whether the body has NaN or Infinity
    outside its strings is `constants` when the depth's scan found it (`body_depth_and_constants`), else searched.
    """
    try:
        run_input = RunAgentInput.model_validate_json(body)
    except ValidationError:
        return None
    if constants is None:
        constants = not _no_constants(body, len(run_input.messages))
    return None if constants else run_input


def _no_constants(body: bytes, messages: int) -> bool:
    """Whether `body` (valid JSON to pydantic's parser) has no NaN or Infinity: false also for such text in a string.

    A byte search costs per byte, a strict parse per value: a body of a few long strings gets the parse.
    """
    if len(body) < _LONG_STRINGS * (messages + 1):
        return b"NaN" not in body and b"Infinity" not in body
    try:
        from_json(body, allow_inf_nan=False, cache_strings=False)
    except ValueError:
        return False
    return True


def check_depth(body: bytes) -> None:
    """Refuse a body that nests more than `MAX_DEPTH` levels anywhere, before it is parsed (`adapter._limits`).

    Raises:
        InputRejected: 422 `INPUT_TOO_DEEP`.
    """
    if body_depth_exceeds(body, MAX_DEPTH):
        raise _too_deep()


def check_limits(run_input: RunAgentInput) -> None:
    """Refuse an input that carries an id no store can keep, or two messages under one id (`adapter._limits`).

    Raises:
        InputRejected: 422 `INVALID_ID` or `DUPLICATE_MESSAGE_ID`, with the id's pointer in `details`.
    """
    held = ids_hold(run_input)  # the common case at once; else each rule finds its first pointer
    bad = None if held else bad_input_id(run_input)
    if bad is not None:
        pointer, problem = bad
        detail: JSON = {"pointer": pointer, "msg": f"the id {problem}"}
        raise InputRejected(422, codes.INVALID_ID, f"The id at {pointer} {problem}.", [detail])
    repeated = None if held else repeated_message_id(run_input)
    if repeated is not None:
        pointer, problem = repeated
        detail = {"pointer": pointer, "msg": f"the id {problem}"}
        raise InputRejected(422, codes.DUPLICATE_MESSAGE_ID, f"The message at {pointer} {problem}.", [detail])


def _too_deep() -> InputRejected:
    return InputRejected(422, codes.INPUT_TOO_DEEP, f"The input nests more than {MAX_DEPTH} levels deep.")


def sanitize_run_input(data: JSON) -> JSON:
    """Drop the messages and content parts this protocol version does not know (IN-1), with a warning.

    A 0.x `binary` part is not unknown but retired: it becomes the typed part it stands for
    (`adapter._compat.upgrade_parts`).

    A message whose `role` is a string outside the known roles, and a content part whose `type`
    (or whose `source.type`) is a string outside the known kinds, is removed from its list; the rest
    of the list is kept in order. Anything else, including a missing or non-string tag, is left for
    validation to judge: that is a malformed known field (IN-2), not an unknown one. Unknown members
    of known objects need nothing here, because the models keep them. The input is not modified;
    changed containers are copied.

    Args:
        data: The decoded JSON body.

    Returns:
        The same value, or a copy with the unrecognised elements removed.
    """
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return data
    messages = [_sanitize_message(message) for message in data["messages"] if _is_known_message(message)]
    return {**data, "messages": messages}


def check_protocol_version(declared: str | None) -> None:
    """Refuse another major version; serve a newer minor or an uninterpretable string with a warning.

    Raises:
        InputRejected: 400 `UNSUPPORTED_PROTOCOL_VERSION` when `declared` is `major.minor` with a
            major other than `SUPPORTED_MAJOR`.
    """
    if declared is None:
        return
    match = _VERSION.fullmatch(declared)
    if match is None:
        logger.warning(
            "serving an uninterpretable protocolVersion %r as %s", declared[:_LOGGED_CHARS], PROTOCOL_VERSION
        )
        return
    major, minor = _magnitude(match[1]), _magnitude(match[2])
    if major != _magnitude(str(SUPPORTED_MAJOR)):
        raise InputRejected(
            400,
            codes.UNSUPPORTED_PROTOCOL_VERSION,
            f"protocolVersion {declared[:_LOGGED_CHARS]!r} is not supported; this server speaks {PROTOCOL_VERSION}.",
        )
    if (major, minor) > _OURS:
        logger.warning("serving protocolVersion %s, newer than ours, as %s", declared[:_LOGGED_CHARS], PROTOCOL_VERSION)


def _magnitude(digits: str) -> tuple[int, str]:
    """An ordering key for a decimal numeral of any length, without int() (which refuses 4 300+ digits)."""
    significant = digits.lstrip("0") or "0"
    return len(significant), significant


_OURS: Final = tuple(_magnitude(component) for component in PROTOCOL_VERSION.split("."))


def _decode(body: bytes) -> JSON:
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
        if _SURROGATE_ESCAPE.search(body):
            # A lone surrogate has no UTF-8 form, so no event carrying it could be sent later.
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        return data
    except UnicodeEncodeError:
        problem = "Invalid JSON: a \\u escape is an unpaired UTF-16 surrogate"
    except UnicodeDecodeError as error:
        problem = f"Body is not UTF-8: {error.reason} at byte {error.start}"
    except json.JSONDecodeError as error:
        problem = f"Invalid JSON: {error.msg} at line {error.lineno} column {error.colno}"
    except ValueError as error:
        problem = f"Invalid JSON: {error}"
    except RecursionError:
        raise _too_deep() from None
    detail = {"type": "json_invalid", "loc": [], "msg": problem}
    raise InputRejected(422, codes.INVALID_INPUT, "The body is not valid JSON.", [detail])


def _refuse_constant(name: str) -> JSON:
    # Python's json accepts NaN and Infinity; JSON does not, and nothing downstream could echo them.
    raise ValueError(f"{name} is not JSON")


def _details(error: ValidationError) -> list[JSON]:
    """Pydantic's errors, echoing only a scalar input (clipped): a nested one may be too deep to write back."""
    errors = error.errors(include_url=False, include_context=False)[:_MAX_ERROR_DETAILS]
    details: list[JSON] = []
    for found in errors:
        echoed = found.get("input")
        detail: dict[str, JSON] = {key: value for key, value in found.items() if key != "input"}
        if isinstance(echoed, str):
            detail["input"] = echoed[:_LOGGED_CHARS]
        elif echoed is None or isinstance(echoed, bool | int | float):
            detail["input"] = echoed
        details.append(to_jsonable_python(detail, fallback=repr))
    return details


def _tags(union: Any, field: str) -> frozenset[str]:
    # The known tags come from the SDK's own discriminated unions, so they track the installed models.
    members: tuple[type[BaseModel], ...] = get_args(get_args(union)[0])
    return frozenset(member.model_fields[field].default for member in members)


_ROLES: Final = _tags(Message, "role")
_PART_TYPES: Final = _tags(ContentPart, "type")
_SOURCE_TYPES: Final = _tags(PartSource, "type")


def _is_known_message(message: JSON) -> bool:
    role = message.get("role") if isinstance(message, dict) else None
    if isinstance(role, str) and role not in _ROLES:
        logger.warning("dropping message %r with unknown role %r", _label(message.get("id")), role[:_LOGGED_CHARS])
        return False
    return True


def _sanitize_message(message: JSON) -> JSON:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    upgraded = upgrade_parts(message["content"], message.get("id"))
    parts = [part for part in upgraded if _is_known_part(part, message.get("id"))]
    return {**message, "content": parts}


def _is_known_part(part: JSON, message_id: JSON) -> bool:
    if not isinstance(part, dict):
        return True
    kind, source = part.get("type"), part.get("source")
    source_kind = source.get("type") if isinstance(source, dict) else None
    if isinstance(kind, str) and kind not in _PART_TYPES:
        logger.warning(
            "dropping a content part of unknown type %r from message %r", kind[:_LOGGED_CHARS], _label(message_id)
        )
        return False
    if isinstance(source_kind, str) and source_kind not in _SOURCE_TYPES:
        logger.warning(
            "dropping a %s part with unknown source type %r from message %r",
            kind,
            source_kind[:_LOGGED_CHARS],
            _label(message_id),
        )
        return False
    return True


def _label(value: JSON) -> str:
    return value[:_LOGGED_CHARS] if isinstance(value, str) else "?"


_INLINE_PARSE_BYTES: Final = 64 * 1024  # larger bodies are parsed off the event loop
_UTF8: Final = frozenset({"utf-8", "utf8"})


def is_json(content_type: str) -> bool:
    """Whether `content_type` is `application/json`, with no charset other than UTF-8."""
    media_type, *parameters = content_type.split(";")
    if media_type.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in _UTF8:
            return False
    return True


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    # Counted as it arrives: Content-Length may be absent (chunked) or wrong.
    body = bytearray()
    async with aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                return None
    return bytes(body)


async def parse_body(body: bytes) -> CheckedInput:
    """The run input in `body`, checked; a large body is parsed on a worker thread, off the event loop."""
    if len(body) <= _INLINE_PARSE_BYTES:
        return parse_run_input(body)
    return await run_in_threadpool(_parse_large, body)


def _parse_large(body: bytes) -> CheckedInput:
    with COLLECTOR.paused():  # its objects all live until it returns: young collections meanwhile free nothing
        return parse_run_input(body)
