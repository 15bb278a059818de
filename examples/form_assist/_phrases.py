"""What a user says about the compute-resource request, in Chinese or English, as draft changes."""

from __future__ import annotations

import re
from typing import Final

REGIONS: Final = {"北京": "Beijing", "上海": "Shanghai", "广州": "Guangzhou"}
"""Region labels (as the page shows them) by enum value's Chinese name."""
LABELS: Final = {value: label for label, value in REGIONS.items()}

_DIGITS: Final = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_WORDS: Final = {
    "one": 1,
    "a": 1,
    "an": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_CN_NUMBER: Final = r"[0-9]+|[零一二两三四五六七八九十]+"
_EN_NUMBER: Final = r"[0-9]+|" + "|".join(sorted(_WORDS, key=len, reverse=True))

QUANTITY_ZH: Final = re.compile(rf"({_CN_NUMBER})\s*台")
QUANTITY_EN: Final = re.compile(
    rf"\b({_EN_NUMBER})\s+(?:cloud\s+)?(?:servers?|instances?|machines?|vms?|nodes?)\b", re.IGNORECASE
)
QUANTITY_FIELD: Final = re.compile(r"(?:数量|quantity)\s*(?:[:：=]|改为|改成|to)?\s*([0-9]+)", re.IGNORECASE)
REGION: Final = re.compile(r"北京|上海|广州|beijing|shanghai|guangzhou", re.IGNORECASE)
PURPOSE: Final = re.compile(r"(?:用途|purpose)\s*(?:是|is)?\s*[:：]\s*(.+?)\s*[。.!！]?\s*$", re.IGNORECASE | re.DOTALL)

_PURPOSE_LABEL: Final = r"(?:用途|purpose)\s*(?:是|is)?\s*[:：]"

PATTERN: Final = "|".join(
    [QUANTITY_ZH.pattern, QUANTITY_EN.pattern, QUANTITY_FIELD.pattern, REGION.pattern, _PURPOSE_LABEL]
)
"""Matches any message that says something about the draft (one regex, for a `Rule`)."""


def parse_changes(text: str) -> dict[str, object]:
    """The draft changes a message asks for: `quantity`, `region` (the enum value) and `purpose`.

    >>> parse_changes("申请两台云服务器，地域选北京")
    {'quantity': 2, 'region': 'Beijing'}
    >>> parse_changes("3 servers in Guangzhou, purpose: load testing")
    {'quantity': 3, 'region': 'Guangzhou', 'purpose': 'load testing'}
    """
    changes: dict[str, object] = {}
    purpose = PURPOSE.search(text)
    head = text[: purpose.start()] if purpose else text  # a purpose may mention numbers or cities itself
    quantity = _quantity(head)
    if quantity is not None:
        changes["quantity"] = quantity
    region = REGION.search(head)
    if region:
        name = region[0]
        changes["region"] = REGIONS.get(name, name.capitalize())
    if purpose and purpose[1].strip():
        changes["purpose"] = purpose[1].strip()
    return changes


def _quantity(text: str) -> int | None:
    for pattern in (QUANTITY_FIELD, QUANTITY_ZH, QUANTITY_EN):
        found = pattern.search(text)
        if found:
            return to_int(found[1])
    return None


def to_int(number: str) -> int | None:
    """An Arabic, Chinese (up to 99) or English (up to ten) number; None when it is none of them."""
    number = number.strip().lower()
    if number.isdigit():
        return int(number)
    if number in _WORDS:
        return _WORDS[number]
    if not number or any(ch not in _DIGITS and ch != "十" for ch in number):
        return None
    tens, sep, ones = number.partition("十")
    if not sep:
        return _DIGITS[number] if len(number) == 1 else None
    high = _DIGITS.get(tens, -1) if tens else 1
    low = _DIGITS.get(ones, -1) if ones else 0
    return high * 10 + low if high >= 0 and low >= 0 else None


def is_chinese(text: str) -> bool:
    """True when the text has any CJK ideograph: the reply then speaks Chinese."""
    return re.search(r"[\u4e00-\u9fff]", text) is not None
