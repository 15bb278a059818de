"""Forms: JSON Schema input that a person fills in mid-run (seed 000).

Two ways in, one way out:

- the model calls the `request_user_input` control tool with a `formKey`; the submission becomes
  that call's ToolMessage and the model decides what to do with it;
- a backend tool raises `FormRequired(form)` before any side effect; the submission replays the tool
  with the data in `ToolContext.submitted_form_data`.

Either way the run ends with an `input_required` interrupt whose `responseSchema` is the form's
schema, frozen into the stored turn, and the page sees an `agent_form` activity message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ag_ui.core import ActivityMessage, Message

from adapter._errors import ConfigurationError
from adapter._run._tools import BaseTool, InputRequired, check_schema
from schema_tools import SchemaPolicyError, form_picker_spec

USER_INPUT_TOOL = "request_user_input"
FORM_ACTIVITY = "agent_form"
FormStatus = Literal["PENDING", "SUBMITTED", "CANCELLED"]


@dataclass(frozen=True, slots=True)
class FormDefinition:
    """A form the agent may ask a person to fill in. Its schema is checked here, at start-up."""

    form_key: str
    description: str
    schema: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.form_key:
            raise ConfigurationError("a form needs a form_key")
        try:
            check_schema(dict(self.schema))
        except SchemaPolicyError as exc:
            raise ConfigurationError(f"form {self.form_key!r} has an unusable schema: {exc}") from exc


class FormRequired(InputRequired):
    """Raised by a backend tool, before any side effect, when it needs a form filled in first.

    The tool runs again from the start once the form is submitted, with the data in
    `ToolContext.submitted_form_data`. Raising it again after that is a protocol error.
    """

    def __init__(self, form: FormDefinition, message: str | None = None) -> None:
        super().__init__(message or form.description, response_schema=form.schema)
        self.form = form


@dataclass(frozen=True, slots=True)
class UserInputTool(BaseTool):
    """The `request_user_input` control tool: the model picks a registered form by its key.

    The model sees the keys (an enum) and what each form is for, never a schema. The tool has no
    body: the runner takes the call over and suspends on the chosen form.
    """

    name: str = USER_INPUT_TOOL
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    forms: tuple[FormDefinition, ...] = ()

    def __init__(self, forms: Iterable[FormDefinition]) -> None:
        registered = tuple(forms)
        keys = [form.form_key for form in registered]
        if len(set(keys)) != len(keys):
            raise ConfigurationError("two forms share a form_key")
        if not registered:
            raise ConfigurationError("UserInputTool needs at least one form")
        description, parameters = form_picker_spec(
            {form.form_key: form.description for form in registered},
            base_description="Ask the user to fill in a form. Use it when a task needs details the user has not given.",
        )
        object.__setattr__(self, "name", USER_INPUT_TOOL)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "parameters", parameters)
        object.__setattr__(self, "external", False)
        object.__setattr__(self, "requires_approval", False)
        object.__setattr__(self, "outcome", None)
        object.__setattr__(self, "forms", registered)

    def form(self, form_key: object) -> FormDefinition | None:
        """The registered form with this key."""
        return next((form for form in self.forms if form.form_key == form_key), None)

    @property
    def form_keys(self) -> list[str]:
        """Every registered key, in order."""
        return [form.form_key for form in self.forms]


def activity_id(turn_id: str, tool_call_id: str) -> str:
    """The id of the activity message that shows one form: stable for the life of the request."""
    return f"{turn_id}:input:{tool_call_id}"


def pending_form(turn_id: str, tool_call_id: str, form_key: str, schema: Mapping[str, Any]) -> ActivityMessage:
    """The activity message a page renders a waiting form from."""
    return ActivityMessage(
        id=activity_id(turn_id, tool_call_id),
        activity_type=FORM_ACTIVITY,
        content={
            "turnId": turn_id,
            "actionId": tool_call_id,
            "formKey": form_key,
            "schema": dict(schema),
            "status": "PENDING",
            "actions": ["SUBMIT"],
            "version": 1,
        },
    )


class ActivityConflict(Exception):
    """The form's activity message is not at the version an update expected."""


def transition(
    message: ActivityMessage,
    status: FormStatus,
    *,
    expected_version: int,
    submitted_values: Any = None,
    submitted_by: str | None = None,
    at: datetime | None = None,
) -> ActivityMessage:
    """Move a PENDING form to SUBMITTED or CANCELLED, compare-and-set on its version."""
    content = dict(message.content)
    if content.get("version") != expected_version or content.get("status") != "PENDING":
        raise ActivityConflict(f"{message.id} is at version {content.get('version')} ({content.get('status')})")
    content.update(status=status, actions=[], version=expected_version + 1)
    if status == "SUBMITTED":
        content["submittedValues"] = submitted_values
        if submitted_by is not None:
            content["submittedBy"] = submitted_by
    if at is not None:
        content["submittedAt" if status == "SUBMITTED" else "cancelledAt"] = at.isoformat()
    return message.model_copy(update={"content": content})


def move_card(
    history: MutableSequence[Message],
    message_id: str,
    status: FormStatus,
    *,
    at: datetime,
    submitted_values: Any = None,
    submitted_by: str | None = None,
) -> ActivityMessage | None:
    """Move the form card `message_id` of `history` on from the version it is at, in place.

    Returns:
        The moved card; None when `history` has no card with that id.

    Raises:
        ActivityConflict: The card was already moved on.
    """
    for index, card in enumerate(history):
        if isinstance(card, ActivityMessage) and card.id == message_id:
            version = card.content.get("version", 1)
            history[index] = moved = transition(
                card,
                status,
                expected_version=version if isinstance(version, int) else 1,
                submitted_values=submitted_values,
                submitted_by=submitted_by,
                at=at,
            )
            return moved
    return None
