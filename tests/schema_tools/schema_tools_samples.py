"""Real-world schemas the policy must accept, shared by several test modules."""

from __future__ import annotations

from typing import Any

MEETING_ROOM_BOOKING: dict[str, Any] = {
    "type": "object",
    "title": "预定会议室",
    "description": "预定会议室时收集会议主题、时间和参会人数",
    "properties": {
        "topic": {"type": "string", "title": "会议主题", "minLength": 1, "maxLength": 200},
        "start": {"type": "string", "title": "开始时间", "format": "date-time"},
        "end": {"type": "string", "title": "结束时间", "format": "date-time"},
        "attendees": {"type": "integer", "title": "参会人数", "minimum": 1, "maximum": 500, "default": 2},
        "needsProjector": {"type": "boolean", "title": "需要投影仪", "default": False},
        "organizerEmail": {"type": "string", "title": "组织者邮箱", "format": "email"},
    },
    "required": ["topic", "start", "end", "attendees"],
    "additionalProperties": False,
}

SUPPORT_TICKET_DETAILS: dict[str, Any] = {
    "type": "object",
    "title": "补充故障信息",
    "properties": {
        "affectedSystem": {"type": "string", "title": "受影响系统"},
        "impactScope": {"type": "string", "title": "影响范围", "enum": ["ONE_USER", "PARTIAL_USERS", "ALL_USERS"]},
    },
    "required": ["affectedSystem", "impactScope"],
}

REQUEST_USER_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"formKey": {"type": "string", "enum": ["meeting_room_booking", "support_ticket_details"]}},
    "required": ["formKey"],
    "additionalProperties": False,
}

CREATE_SUPPORT_TICKET: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "Short summary, e.g. 登录故障"},
        "priority": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]},
        "affectedSystem": {"type": "string"},
        "impactScope": {"type": "string", "enum": ["ONE_USER", "PARTIAL_USERS", "ALL_USERS"]},
    },
    "required": ["title", "priority", "affectedSystem", "impactScope"],
    "additionalProperties": False,
}

RESERVE_MEETING_ROOM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "start": {"type": "string", "format": "date-time"},
        "end": {"type": "string", "format": "date-time"},
        "attendees": {"type": "integer", "minimum": 1},
    },
    "required": ["topic", "start", "end", "attendees"],
}

QUERY_DB: dict[str, Any] = {
    "type": "object",
    "description": "Backend tool (externalTool=false): run a read-only query.",
    "properties": {
        "table": {"type": "string", "enum": ["orders", "customers", "tickets"]},
        "filters": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
    },
    "required": ["table"],
}

READ_FILE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "pattern": "^[A-Za-z0-9_./-]+$", "maxLength": 255},
        "encoding": {"type": "string", "enum": ["utf-8", "latin-1"], "default": "utf-8"},
    },
    "required": ["path"],
}

OPEN_PAGE: dict[str, Any] = {
    "type": "object",
    "description": "Frontend tool: navigate the browser to a page of the app.",
    "properties": {
        "url": {"type": "string", "format": "uri"},
        "newTab": {"type": "boolean", "default": False},
    },
    "required": ["url"],
}

SHOW_TOAST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "maxLength": 280},
        "level": {"type": "string", "enum": ["info", "success", "warning", "error"], "default": "info"},
        "durationMs": {"type": "integer", "minimum": 500, "maximum": 30000},
    },
    "required": ["message"],
}

HIGHLIGHT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "selector": {"type": "string", "description": "CSS selector of the element to highlight"},
        "color": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
    },
    "required": ["selector"],
}

CONFIRM_ACTION: dict[str, Any] = {
    "type": "object",
    "description": "HITL frontend tool: ask the user to confirm an action.",
    "properties": {
        "title": {"type": "string"},
        "message": {"type": "string"},
        "confirmLabel": {"type": "string", "default": "确认"},
        "rejectLabel": {"type": "string", "default": "拒绝"},
    },
    "required": ["title", "message"],
}

REQUEST_REFUND_APPROVAL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "orderId": {"type": "string", "pattern": "^O-[0-9]+$"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "currency": {"type": "string", "enum": ["CNY", "USD", "EUR"]},
        "reason": {"type": "string"},
        "lineItems": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                "required": ["sku", "qty"],
            },
            "minItems": 1,
        },
    },
    "required": ["orderId", "amount", "currency"],
}

COLLECT_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string"},
        "fields": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"enum": ["text", "number", "date", "select"]},
                    "options": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                },
                "required": ["name", "kind"],
            },
        },
    },
    "required": ["prompt", "fields"],
}

OPENAI_GET_WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["location"],
}

OPENAI_NESTED_OBJECTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string"},
                "geo": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "lng": {"type": "number"}},
                    "required": ["lat", "lng"],
                    "additionalProperties": False,
                },
            },
            "required": ["street", "city", "geo"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "address"],
    "additionalProperties": False,
}

OPENAI_ARRAY_OF_OBJECTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"explanation": {"type": "string"}, "output": {"type": "string"}},
                "required": ["explanation", "output"],
                "additionalProperties": False,
            },
        },
        "final_answer": {"type": "string"},
    },
    "required": ["steps", "final_answer"],
    "additionalProperties": False,
}

OPENAI_NULLABLE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "age": {"type": ["integer", "null"]},
    },
    "required": ["name", "nickname", "age"],
    "additionalProperties": False,
}

OPENAI_LINKED_LIST: dict[str, Any] = {
    "type": "object",
    "properties": {"linked_list": {"$ref": "#/$defs/linked_list_node"}},
    "$defs": {
        "linked_list_node": {
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "next": {"anyOf": [{"$ref": "#/$defs/linked_list_node"}, {"type": "null"}]},
            },
            "additionalProperties": False,
            "required": ["next", "value"],
        }
    },
    "additionalProperties": False,
    "required": ["linked_list"],
}

OPENAI_UI_TREE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "description": "The type of the UI component", "enum": ["div", "button", "header"]},
        "label": {"type": "string", "description": "The label of the UI component, used for buttons or form fields"},
        "children": {"type": "array", "description": "Nested UI components", "items": {"$ref": "#"}},
        "attributes": {
            "type": "array",
            "description": "Arbitrary attributes for the UI component, suitable for any element",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name of the attribute, for example class"},
                    "value": {"type": "string", "description": "The value of the attribute"},
                },
                "additionalProperties": False,
                "required": ["name", "value"],
            },
        },
    },
    "required": ["type", "label", "children", "attributes"],
    "additionalProperties": False,
}

OPENAI_DEFS_ENUM: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:example:steps",
    "type": "object",
    "properties": {
        "status": {"$ref": "#/$defs/status"},
        "history": {"type": "array", "items": {"$ref": "#status"}},
    },
    "x-ui-order": ["status", "history"],
    "$defs": {"status": {"$anchor": "status", "enum": ["open", "closed"]}},
    "$comment": "Anchors and urn ids are local; nothing is fetched.",
    "x-ui": {"widget": "select", "help": "Pick a status"},
}

FORMS = {"meeting-room": MEETING_ROOM_BOOKING, "support-ticket": SUPPORT_TICKET_DETAILS}
TOOLS = {
    "request_user_input": REQUEST_USER_INPUT,
    "create_support_ticket": CREATE_SUPPORT_TICKET,
    "reserve_meeting_room": RESERVE_MEETING_ROOM,
    "queryDB": QUERY_DB,
    "readFile": READ_FILE,
    "openPage": OPEN_PAGE,
    "showToast": SHOW_TOAST,
    "highlight": HIGHLIGHT,
    "confirmAction": CONFIRM_ACTION,
    "requestRefundApproval": REQUEST_REFUND_APPROVAL,
    "collectInput": COLLECT_INPUT,
    "openai-get-weather": OPENAI_GET_WEATHER,
    "openai-nested-objects": OPENAI_NESTED_OBJECTS,
    "openai-array-of-objects": OPENAI_ARRAY_OF_OBJECTS,
    "openai-nullable": OPENAI_NULLABLE,
    "openai-linked-list": OPENAI_LINKED_LIST,
    "openai-ui-tree": OPENAI_UI_TREE,
    "defs-anchor-urn": OPENAI_DEFS_ENUM,
}
