from __future__ import annotations

import pytest

from schema_tools._docstring import Docstring, parse_docstring  # private on purpose: the parser behind the schemas

GOOGLE = """Get the weather.

    Looks the city up first.

    Args:
        city: The city,
            in English.
        unit (str): The unit.
        *tags: Ignored kinds are parsed anyway.

    Returns:
        A sentence.

    Raises:
        KeyError: Unknown city.

    Example:
        get_weather("Paris")
    """


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(None, Docstring(""), id="none"),
        pytest.param("One line.", Docstring("One line."), id="one-line"),
        pytest.param(
            GOOGLE,
            Docstring(
                'Get the weather.\n\nLooks the city up first.\n\nExample:\n    get_weather("Paris")',
                {"city": "The city, in English.", "unit": "The unit.", "tags": "Ignored kinds are parsed anyway."},
            ),
            id="google",
        ),
        pytest.param(
            "Summary.\n\nRaises:\n    ValueError: x\nTrailing prose.",
            Docstring("Summary.\n\nTrailing prose."),
            id="prose-after",
        ),
        pytest.param("Do it.\n\nArguments:\n    a: A.\n", Docstring("Do it.", {"a": "A."}), id="arguments-alias"),
    ],
)
def test_parse_docstring(doc: str | None, expected: Docstring) -> None:
    assert parse_docstring(doc) == expected
