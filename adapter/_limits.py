"""The limits on what a run takes in, each stated once: how deep JSON may nest, what an id may be.

    MAX_DEPTH     a run input nests at most this many levels of objects and arrays (the root is 1)
    STATE_DEPTH   the state, one level inside the input: what a tool makes must fit back into an input
    body_depth_exceeds / depth_exceeds   the nesting rule, on a body's bytes / on a JSON value
    loads         `json.loads` for JSON text inside an input (a tool message, a model's arguments), under the rule
    id_problem    why a string cannot be an id that every store keeps, or None
    bad_input_id  the first id of a run input that breaks that rule (all checked at once), or None
    repeated_message_id   the first message of a run input whose id an earlier one has, or None
    ids_hold      whether a run input breaks neither id rule: the common case, both answered in one listing
    check_run_input / check_id   the rules on what the Python API is given, as `LimitExceeded`

Both rules exist because something downstream breaks past them: pydantic's serializer gives up near
255 levels (an input 254 levels deep used to pass the edge and end as `INTERNAL_ERROR`), PostgreSQL
`text` refuses NUL, a key index refuses long values, and UTF-8 has no form for a lone surrogate.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any, Final

from ag_ui.core import AssistantMessage, RunAgentInput, ToolMessage
from pydantic import BaseModel

from adapter import _errors as codes
from adapter._errors import LimitExceeded
from adapter._types import KIND_BY_CLASS, message_kind

MAX_DEPTH: Final = 100
"""Levels of nesting a run input may have, every member counted alike; far below pydantic's ~255."""

STATE_DEPTH: Final = MAX_DEPTH - 1
"""Levels the shared state may have: it is the `state` member of the next input."""

MAX_REASON_CHARS: Final = 2000
"""The longest `reason` an approval's answer may give (characters): the model reads it, and the record keeps it."""
MAX_ID_CHARS: Final = 256
"""Characters an id may have: a UUID needs 36; 256 keep any store's key index small."""

_ID = attrgetter("id")
_CALL_ID = attrgetter("tool_call_id")
_CALLS = attrgetter("tool_calls")
_UNKEEPABLE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # control characters (Cc), lone surrogates
_NOT_MARKS: Final = bytes(byte for byte in range(256) if byte not in b'[]{}"')
_NOT_MARKS_OR_CONSTANTS: Final = bytes(byte for byte in range(256) if byte not in b'[]{}"NI')
"""Outside its strings, JSON text has an `N` or an `I` only in a `NaN` or an `Infinity`, which pydantic takes."""
_ESCAPED: Final = b'"\\/bfnrtu'  # what may follow a backslash in JSON text
_NOT_MARKS_OR_ESCAPES: Final = {
    others: bytes(byte for byte in others if byte not in _ESCAPED) for others in (_NOT_MARKS, _NOT_MARKS_OR_CONSTANTS)
}
"""For each `others`, what the first pass drops: it keeps each escape whole, so that the escapes can go next."""
_SPENT_ESCAPE: Final = b"  "  # what an escape is overwritten with: two bytes that every `others` drops
_AS_PARENS: Final = bytes.maketrans(b"[]{}", b"()()")
_AS_STEPS: Final = bytes.maketrans(b"()", b"\x01\xff")  # +1 and -1 once read as signed bytes
_DIP_PASSES: Final = 3
_SHORT_BODY: Final = 4096
"""Bytes up to which a body's brackets are counted whole; a longer one's after the scan's first pass, which keeps
every bracket in a text several times shorter (counting the body whole first would cost about what that pass does)."""


def body_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether the JSON text `body` nests more than `limit` levels of objects and arrays (the root is 1).

    Measured on the bytes, before any parser recurses: strings are cut out, each bracket left becomes
    a step of +1 or -1, and the deepest point is the largest running sum. Every step is a C loop over
    bytes (`_brackets_outside_strings`), and any depth is measured safely.
    """
    if len(body) <= _SHORT_BODY and _few_brackets(body, limit):
        return False
    marks = body.translate(None, _NOT_MARKS_OR_ESCAPES[_NOT_MARKS])
    if _few_brackets(marks, limit):
        return False
    return _deepest(_outside_strings(marks, _NOT_MARKS)) > limit


def body_depth_and_constants(body: bytes, limit: int) -> tuple[bool, bool | None]:
    """`body_depth_exceeds`, and whether the JSON text `body` has a NaN or an Infinity outside its strings.

    One scan answers both for a long body; a body with too few brackets to nest that deep is not scanned, and
    the second answer is None then (unknown). The edge asks it of a body pydantic's parser took, which also
    takes those constants where JSON has none.
    """
    if len(body) <= _SHORT_BODY and _few_brackets(body, limit):
        return False, None
    marks = body.translate(None, _NOT_MARKS_OR_ESCAPES[_NOT_MARKS_OR_CONSTANTS])
    if _few_brackets(marks, limit):
        return False, None
    outside = _outside_strings(marks, _NOT_MARKS_OR_CONSTANTS)
    constants = b"N" in outside or b"I" in outside
    if constants:
        outside = outside.translate(None, b"NI")
    return _deepest(outside) > limit, constants


def _deepest(brackets: bytes) -> int:
    """The deepest point of `brackets`: each opening one a level down, each closing one a level back up."""
    parens = brackets.translate(_AS_PARENS)
    for _ in range(_DIP_PASSES):
        # A close right before an open (`},{` between two objects) is a dip that no maximum is at.
        parens = parens.replace(b")(", b"")
    return max(itertools.accumulate(memoryview(parens.translate(_AS_STEPS)).cast("b")), default=0)


def _few_brackets(text: bytes, limit: int) -> bool:
    """Whether `text` has too few brackets to nest more than `limit` levels: the common case, two C loops."""
    return text.count(b"[") + text.count(b"{") <= limit


def _brackets_outside_strings(body: bytes, others: bytes = _NOT_MARKS) -> bytes:
    """The brackets of JSON text `body` that are not inside a string, in order (and what `others` does not name).

    The bytes that can be neither a mark nor part of an escape go first, in one C loop that shrinks the
    body several times over (a backslash and the byte after it stay next to each other: in JSON that
    byte is one of `_ESCAPED`). Escaped backslashes, then escaped quotes, go next (each overwritten in
    place by two bytes the next pass drops, which copies the text once rather than counting, then
    joining), so every quote left delimits a string; all but quotes and brackets (the bytes of
    `others`) go next; then a pair of adjacent quotes (an empty string, or the end of one and the start
    of the next) goes, which leaves every bracket inside or outside as it was; what is between the odd
    and the next even quote is inside. On text that is not JSON the measure may differ from a parser's
    only after the point where the parser stops (an escape JSON has not, or a backslash outside a
    string, is such a point).
    """
    return _outside_strings(body.translate(None, _NOT_MARKS_OR_ESCAPES[others]), others)


def _outside_strings(marks: bytes, others: bytes) -> bytes:
    """`_brackets_outside_strings` after its first pass, which keeps every bracket and is where they are counted."""
    marks = marks.replace(b"\\\\", _SPENT_ESCAPE).replace(b'\\"', _SPENT_ESCAPE)
    marks = marks.translate(None, others).replace(b'""', b"")
    return b"".join(marks.split(b'"')[::2])


def loads(text: str) -> Any:
    """Parse JSON text that arrived inside an input or from a model, under the nesting rule.

    Such text is a string to the edge, so its depth is measured here, before the parser recurses.

    Raises:
        ValueError: `text` is not JSON, or nests more than `MAX_DEPTH` levels (as text that is not JSON).
    """
    if body_depth_exceeds(text.encode("utf-8", "surrogatepass"), MAX_DEPTH):
        raise ValueError(f"the JSON text nests more than {MAX_DEPTH} levels deep")
    return json.loads(text)


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether the JSON value `value` nests more than `limit` levels of objects and arrays (the root is 1).

    The walk uses no recursion, so any depth is measured safely.
    """
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


_DOT_SEGMENTS: Final = frozenset({".", ".."})


def id_problem(value: str) -> str | None:
    """Why `value` cannot be an id that every store keeps, or None when it can.

    The rule: at most `MAX_ID_CHARS` characters, none of them a control character (U+0000-U+001F,
    U+007F-U+009F) or a lone surrogate (no UTF-8 form).
    """
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    found = _UNKEEPABLE.search(value)
    if found is not None:
        return f"contains the character U+{ord(found[0]):04X}"
    return None


def input_ids(run_input: RunAgentInput) -> Iterator[tuple[str, str]]:
    """Every id a run input carries that a store may keep or look up, with its JSON pointer."""
    for where, value in _id_sites(run_input):
        yield "/" + "/".join(map(str, where)), value


def bad_input_id(run_input: RunAgentInput) -> tuple[str, str] | None:
    """The first id of `run_input` that breaks `id_problem`'s rule, as its pointer and problem; None if none does.

    All the ids are checked at once, their lengths in one pass and their characters in one search of
    them joined (joining adds no character and merges none); only an input that fails is walked again,
    for the pointer. A thread or run id is a URL path segment too (`/threads/{threadId}/runs/{runId}`): `.` and
    `..` are refused, since a browser or proxy resolves them away and no route could reach the thread again.
    """
    for pointer, value in (("/threadId", run_input.thread_id), ("/runId", run_input.run_id)):
        if value in _DOT_SEGMENTS:
            return pointer, "is a dot segment (. or ..), which no URL path can carry"
    values = input_id_values(run_input)
    if max(map(len, values)) <= MAX_ID_CHARS and _keepable("".join(values)):
        return None
    for pointer, value in input_ids(run_input):
        problem = id_problem(value)
        if problem is not None:
            return pointer, problem
    return None  # pragma: no cover - the joined search found what one of the values holds


def repeated_message_id(run_input: RunAgentInput) -> tuple[str, str] | None:
    """The pointer of the first message whose id an earlier message of `run_input` has, and that id; None if none.

    Message ids are unique in a thread: two messages under one id cannot both be stored, answered or paged to.
    """
    if len(set(map(_ID, run_input.messages))) == len(run_input.messages):
        return None  # the common case, in one pass of C; the walk below finds the pointer
    seen: dict[str, int] = {}
    for index, message in enumerate(run_input.messages):
        first = seen.setdefault(message.id, index)
        if first != index:
            return f"/messages/{index}/id", f"repeats the id of /messages/{first}"
    return None


def ids_hold(run_input: RunAgentInput) -> bool:
    """Whether `run_input` breaks neither `bad_input_id`'s rule nor `repeated_message_id`'s: the common case.

    The message ids are read once, for their set and with the other ids; when either rule may be broken, the two
    functions walk the input again for the first pointer.
    """
    if run_input.thread_id in _DOT_SEGMENTS or run_input.run_id in _DOT_SEGMENTS:
        return False
    message_ids = list(map(_ID, run_input.messages))
    if len(set(message_ids)) != len(message_ids):
        return False
    values = input_id_values(run_input, message_ids)
    return max(map(len, values)) <= MAX_ID_CHARS and _keepable("".join(values))


def _keepable(text: str) -> bool:
    """Whether `text` has no character `id_problem` refuses: ASCII text by `isprintable`, which refuses just those."""
    return text.isprintable() if text.isascii() else _UNKEEPABLE.search(text) is None


def input_id_values(run_input: RunAgentInput, message_ids: Iterable[str] | None = None) -> list[str]:
    """The values `_id_sites` gives, without their pointers (the messages' own ids together): per message, in C.

    `message_ids` are the messages' ids when the caller read them already. Each message's class is looked up
    (`message_kind`), not tested with `isinstance`, which goes through the pydantic metaclass's check, and its
    fields are read by `attrgetter`s, in C (a `cast` is a Python call per message); tests/protocol/test_input_ids.py
    holds the two listings to the same values for any input.
    """
    values = [run_input.thread_id, run_input.run_id]
    if run_input.parent_run_id is not None:
        values.append(run_input.parent_run_id)
    values += map(_ID, run_input.messages) if message_ids is None else message_ids
    kinds, add = KIND_BY_CLASS, values.append
    for message in run_input.messages:
        kind = kinds.get(message.__class__) or message_kind(message)
        if kind is ToolMessage:
            add(_CALL_ID(message))
        elif kind is AssistantMessage:
            calls = _CALLS(message)
            if calls:
                values += map(_ID, calls)
    values.extend(entry.interrupt_id for entry in run_input.resume or ())
    return values


def _id_sites(run_input: RunAgentInput) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every id a run input carries that a store may keep or look up, with where it is (the pointer's parts)."""
    yield ("threadId",), run_input.thread_id
    yield ("runId",), run_input.run_id
    if run_input.parent_run_id is not None:
        yield ("parentRunId",), run_input.parent_run_id
    for index, message in enumerate(run_input.messages):
        yield ("messages", index, "id"), message.id
        if isinstance(message, ToolMessage):
            yield ("messages", index, "toolCallId"), message.tool_call_id
        if isinstance(message, AssistantMessage):
            for position, call in enumerate(message.tool_calls or []):
                yield ("messages", index, "toolCalls", position, "id"), call.id
    for index, entry in enumerate(run_input.resume or []):
        yield ("resume", index, "interruptId"), entry.interrupt_id


def check_run_input(run_input: RunAgentInput) -> None:
    """Refuse an input the Python API was given under the rules the HTTP edge applies to a body.

    An input the edge parsed comes to `Adapter.start` as a `CheckedInput` (`_edge._input`) and is not walked again.

    Raises:
        LimitExceeded: 422 `INVALID_ID` (the id's pointer in the message), 422 `DUPLICATE_MESSAGE_ID`, or 422
            `INPUT_TOO_DEEP`.
    """
    held = ids_hold(run_input)  # the common case at once; else each rule finds its first pointer
    bad = None if held else bad_input_id(run_input)
    if bad is not None:
        raise LimitExceeded(f"The id at {bad[0]} {bad[1]}.", code=codes.INVALID_ID, status_code=422)
    repeated = None if held else repeated_message_id(run_input)
    if repeated is not None:
        message = f"The message at {repeated[0]} {repeated[1]}."
        raise LimitExceeded(message, code=codes.DUPLICATE_MESSAGE_ID, status_code=422)
    if model_depth_exceeds(run_input, MAX_DEPTH):
        message = f"The input nests more than {MAX_DEPTH} levels deep."
        raise LimitExceeded(message, code=codes.INPUT_TOO_DEEP, status_code=422)


def check_id(value: str, pointer: str) -> None:
    """Refuse an id given to the Python API that no store can keep (`id_problem`); `pointer` names it.

    Raises:
        LimitExceeded: 422 `INVALID_ID`.
    """
    problem = id_problem(value)
    if problem is not None:
        raise LimitExceeded(f"The id at {pointer} {problem}.", code=codes.INVALID_ID, status_code=422)


def model_depth_exceeds(value: Any, limit: int) -> bool:
    """`depth_exceeds` for a value that holds models too: a model is an object of its fields and extra members.

    Tuples count as arrays. The walk uses no recursion, so any depth is measured safely.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, BaseModel):
            children = [*vars(node).values(), *(node.__pydantic_extra__ or {}).values()]
        elif isinstance(node, dict):
            children = list(node.values())
        elif isinstance(node, list | tuple):
            children = list(node)
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class CheckedInput:
    """A run input the HTTP edge parsed from a body and checked: the nesting and id rules of `adapter._limits` hold.

    Only `parse_run_input` makes one. What the edge checked is what runs: `Adapter.start` takes the input as it is
    only while no code has read `input` since (code between the edge and the run, an `Adapter` subclass, may have
    changed it in place); once it was read, the input is checked again, as any input the Python API is given.
    """

    __slots__ = ("_input", "_read")

    def __init__(self, run_input: RunAgentInput) -> None:
        self._input = run_input
        self._read = False

    @property
    def input(self) -> RunAgentInput:
        """The input, for app code between the edge and the adapter; once read, `Adapter.start` checks it again."""
        self._read = True
        return self._input

    def unread(self) -> RunAgentInput | None:
        """The input as the edge checked it, if no code read it since (so none can have changed it); else None."""
        return None if self._read else self._input
