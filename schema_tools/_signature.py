"""JSON Schemas for the parameters of Python callables, and binding JSON arguments back to them."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, get_args, get_origin

import pydantic
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from schema_tools._docstring import parse_docstring
from schema_tools._errors import SchemaIssue, SchemaValidationError
from schema_tools._pointer import pointer

__all__ = ["CallableSignature", "Injected", "schema_from_callable", "schema_from_model"]


class _InjectedMarker:
    """The type of `Injected`."""

    def __repr__(self) -> str:
        return "Injected"


Injected: Final = _InjectedMarker()
"""Marks a parameter the caller supplies, never the model: ``ctx: Annotated[Context, Injected]``."""

_KEYWORDS: Final = {
    "missing": "required",
    "extra_forbidden": "additionalProperties",
    "enum": "enum",
    "literal_error": "enum",
    "greater_than": "exclusiveMinimum",
    "greater_than_equal": "minimum",
    "less_than": "exclusiveMaximum",
    "less_than_equal": "maximum",
    "string_too_short": "minLength",
    "string_too_long": "maxLength",
    "too_short": "minItems",
    "too_long": "maxItems",
    "string_pattern_mismatch": "pattern",
    "model_type": "type",
    "model_attributes_type": "type",
    "dict_type": "type",
    "list_type": "type",
}


class _Generator(GenerateJsonSchema):
    """Pydantic's generator without the titles it derives from field names."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


@dataclass(frozen=True)
class CallableSignature:
    """The model-facing view of a Python callable: its name, description and parameter schema.

    Build one with `from_callable`. Treat `schema` as read-only.

    Attributes:
        name: The callable's ``__name__``.
        description: The docstring without its ``Args``/``Returns``/``Yields``/``Raises`` sections.
        schema: The JSON Schema (an object) of the parameters the model supplies.
        injected: Parameter name to type, for parameters the caller supplies; they are not in `schema`.
        is_async: Whether calling the callable returns an awaitable.
    """

    name: str
    description: str
    schema: dict[str, Any]
    injected: dict[str, Any]
    is_async: bool
    _model: type[pydantic.BaseModel] = field(repr=False, compare=False)
    _names: dict[str, str] = field(repr=False, compare=False)

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], *, injected: tuple[type, ...] = ()) -> CallableSignature:
        """Read the signature, type hints and docstring of `fn`.

        Parameters without an annotation accept anything (schema ``{}``). Parameters with a default are
        optional. ``Annotated[T, Field(description=...)]`` or ``Annotated[T, "text"]`` describe a parameter;
        otherwise its ``Args:`` entry in the Google-style docstring does. A parameter is injected when its
        type is (a subclass of) one of `injected`, or when it is annotated ``Annotated[T, Injected]``.

        Args:
            fn: A sync or async function, method or other callable.
            injected: Types whose parameters the caller supplies.

        Raises:
            TypeError: For ``*args``, ``**kwargs`` or positional-only parameters, or unresolvable hints.
        """
        doc = parse_docstring(inspect.getdoc(fn))
        hints = _type_hints(fn)
        fields: dict[str, Any] = {}
        names: dict[str, str] = {}
        found: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            _refuse_kind(fn, param)
            hint = hints.get(param.name, Any)
            if _is_injected(hint, injected):
                found[param.name] = _strip_annotated(hint)
                continue
            key = f"p{len(names)}"  # safe field names; the parameter name is the alias
            names[key] = param.name
            fields[key] = _field(param, hint, doc.params.get(param.name))
        model, schema = _arguments_model(_name(fn), fields)
        return cls(_name(fn), doc.description, schema, found, _is_async(fn), model, names)

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate parsed JSON `arguments` and convert them to keyword arguments for the callable.

        Values become their Python types (models, enums ...) and defaults are filled in. Injected
        parameters are not included; the caller adds them.

        Raises:
            SchemaValidationError: With one issue per problem, pointers like ``"/city"``.
        """
        try:
            parsed = self._model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise SchemaValidationError([_issue(arguments, error) for error in exc.errors()]) from None
        return {name: getattr(parsed, key) for key, name in self._names.items()}


def schema_from_callable(fn: Callable[..., Any], *, injected: tuple[type, ...] = ()) -> dict[str, Any]:
    """Return the parameter schema of `fn`; see `CallableSignature.from_callable`."""
    return CallableSignature.from_callable(fn, injected=injected).schema


def schema_from_model(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """Return the JSON Schema of a pydantic model.

    Field titles derived from field names are left out; the root keeps a title only when the model's
    config sets one.
    """
    return _model_schema(model, keep_title="title" in model.model_config)


def _model_schema(model: type[pydantic.BaseModel], *, keep_title: bool) -> dict[str, Any]:
    schema = model.model_json_schema(schema_generator=_Generator)
    if not keep_title:
        schema.pop("title", None)
    schema.setdefault("properties", {})
    if not schema.get("required"):
        schema.pop("required", None)
    return schema


def _arguments_model(name: str, fields: dict[str, Any]) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    config = pydantic.ConfigDict(extra="forbid")
    try:
        model = pydantic.create_model(f"{name}_arguments", __config__=config, **fields)
        return model, _model_schema(model, keep_title=False)
    except pydantic.PydanticUserError as exc:
        raise TypeError(f"{name}: a parameter type has no JSON Schema: {exc}") from exc


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with an async __call__
    return inspect.iscoroutinefunction(fn) or (not inspect.isroutine(fn) and inspect.iscoroutinefunction(call))


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn if inspect.isroutine(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    try:
        return typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"cannot resolve the type hints of {_name(fn)!r}: {exc}") from exc


def _refuse_kind(fn: Callable[..., Any], param: inspect.Parameter) -> None:
    kinds = {
        inspect.Parameter.VAR_POSITIONAL: f"*{param.name}",
        inspect.Parameter.VAR_KEYWORD: f"**{param.name}",
        inspect.Parameter.POSITIONAL_ONLY: f"positional-only {param.name!r}",
    }
    if param.kind in kinds:
        raise TypeError(f"{_name(fn)}: {kinds[param.kind]} cannot be described by a JSON object schema")


def _is_injected(hint: Any, injected: tuple[type, ...]) -> bool:
    if get_origin(hint) is Annotated and any(meta is Injected for meta in get_args(hint)[1:]):
        return True
    base = _strip_annotated(hint)
    if isinstance(base, types.UnionType) or get_origin(base) is typing.Union:
        members = [member for member in get_args(base) if member is not type(None)]
        return bool(members) and all(_is_injected(member, injected) for member in members)
    base = get_origin(base) or base
    return bool(injected) and isinstance(base, type) and issubclass(base, injected)


def _strip_annotated(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _field(param: inspect.Parameter, hint: Any, doc_description: str | None) -> tuple[Any, FieldInfo]:
    hint, described = _describe_annotated(hint)
    default = ... if param.default is inspect.Parameter.empty else param.default
    if described or doc_description is None:
        return hint, pydantic.Field(default, alias=param.name)
    return hint, pydantic.Field(default, alias=param.name, description=doc_description)


def _describe_annotated(hint: Any) -> tuple[Any, bool]:
    """Turn plain-string ``Annotated`` metadata into a description; say whether one is given."""
    if get_origin(hint) is not Annotated:
        return hint, False
    base, *metadata = get_args(hint)
    texts = [meta for meta in metadata if isinstance(meta, str)]
    others = [meta for meta in metadata if not isinstance(meta, str)]
    described = any(isinstance(meta, FieldInfo) and meta.description for meta in others)
    if texts and not described:
        others.append(pydantic.Field(description=" ".join(texts)))
        described = True
    return (Annotated[(base, *others)] if others else base), described


def _issue(arguments: object, error: Mapping[str, Any]) -> SchemaIssue:
    kind = str(error["type"])
    keyword = _KEYWORDS.get(kind, "type" if kind.endswith(("_type", "_parsing")) else kind)
    return SchemaIssue(pointer(_instance_path(arguments, error["loc"], kind)), keyword, str(error["msg"]))


def _instance_path(value: object, loc: tuple[str | int, ...], kind: str) -> list[str | int]:
    """Keep the steps of a pydantic ``loc`` that exist in the input; drop union tags like ``"int"``."""
    path: list[str | int] = []
    for index, step in enumerate(loc):
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and -len(value) <= step < len(value):
            value = value[step]
        elif not (index == len(loc) - 1 and kind == "missing"):
            continue
        path.append(step)
    return path
