"""The demo page in Chromium: tools, approvals, forms, reload, errors, narrow screens."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from browserkit import DemoServer
from playwright.sync_api import Browser, Page, Request, Route, expect

ARTIFACTS = Path(__file__).parents[1] / "artifacts"


def say(page: Page, text: str) -> None:
    page.fill("#message", text)
    page.click("#send")


def replies(page: Page) -> Any:
    return page.locator(".msg.assistant .bubble")


def card(page: Page, tool_call_of: str) -> Any:
    return page.locator(f'.tool-call[data-tool-name="{tool_call_of}"] [data-interrupt]')


def thread_id(page: Page) -> str:
    return page.inner_text("#thread")


def test_a_page_tool_runs_in_the_page_and_the_run_resumes(page: Page) -> None:
    say(page, "go to settings")

    expect(replies(page).last).to_have_text("I opened the settings page for you.")
    expect(page.locator(".panel")).to_have_attribute("data-current", "settings")
    expect(page.locator('[data-page="settings"]')).to_be_visible()
    expect(page.locator('[data-page="form"]')).to_be_hidden()
    expect(page.locator('.tool-call[data-tool-name="navigate"] .tool-result')).to_contain_text('"opened": "settings"')

    say(page, "toast: hello there")

    expect(page.locator(".toast")).to_have_text("hello there")
    expect(replies(page).last).to_have_text("Done.")


def posted(page: Page) -> list[dict[str, Any]]:
    """The bodies the page POSTs from now on."""
    sent: list[dict[str, Any]] = []

    def note(request: Request) -> None:
        if request.method == "POST":
            sent.append(request.post_data_json or {})

    page.on("request", note)
    return sent


def test_a_page_tool_is_answered_with_a_tool_message_by_default(page: Page) -> None:
    sent = posted(page)

    say(page, "go to settings")

    expect(replies(page).last).to_have_text("I opened the settings page for you.")
    first, answer = sent
    assert first["protocolVersion"] == "1.0"
    assert "resume" not in answer
    (call,) = [call for m in answer["messages"] if m["role"] == "assistant" for call in m.get("toolCalls", [])]
    assert answer["messages"][-1] == {
        "id": f"tool_{call['id']}",
        "role": "tool",
        "toolCallId": call["id"],
        "content": '{"opened":"settings"}',
    }


def test_a_page_tool_is_answered_with_a_resume_entry_in_interrupt_mode(browser: Browser, tmp_path: Path) -> None:
    server = DemoServer(tmp_path / "demo.db", frontend_outcome="interrupt")
    context = browser.new_context(base_url=server.url, locale="en-US")
    try:
        page = context.new_page()
        sent = posted(page)
        page.goto("/")

        say(page, "go to settings")

        expect(replies(page).last).to_have_text("I opened the settings page for you.")
        _, resumed = sent
        (entry,) = resumed["resume"]
        assert entry["status"] == "resolved"
        assert entry["payload"] == {"opened": "settings"}
        assert not any(m["role"] == "tool" for m in resumed["messages"])
    finally:
        context.close()
        server.stop()


def test_a_confirmation_dialog_answers_the_agent(page: Page) -> None:
    say(page, "confirm delete report.pdf")
    dialog = card(page, "confirm_action")
    expect(dialog).to_contain_text("delete report.pdf")
    expect(page.locator("#message")).to_be_disabled()

    dialog.get_by_role("button", name="Reject").click()

    expect(replies(page).last).to_have_text("Understood, I will not delete report.pdf.")
    expect(page.locator(".tool-call[data-tool-name=confirm_action] .tool-result")).to_contain_text('"confirmed": false')
    expect(page.locator("#message")).to_be_enabled()


def test_an_approved_refund_runs_on_the_server(page: Page) -> None:
    say(page, "refund order A100")
    approval = card(page, "refund_order")
    expect(approval).to_contain_text("Approve the call to refund_order?")
    expect(page.locator(".tool-call[data-tool-name=lookup_order] .tool-result")).to_contain_text(
        '"status": "delivered"'
    )

    approval.get_by_role("button", name="Approve").click()

    expect(replies(page).last).to_contain_text("Done: order A100 was refunded.")
    expect(page.locator(".tool-call[data-tool-name=refund_order] .tool-result")).to_contain_text('"refunded": 59')


def test_an_approval_with_edits_runs_with_the_edited_arguments(page: Page) -> None:
    say(page, "refund order A100")
    approval = card(page, "refund_order")
    approval.get_by_role("button", name="Edit").click()
    amount = approval.locator("input[name=amount]")
    expect(amount).to_have_value("59")

    amount.fill("")
    approval.get_by_role("button", name="Approve with edits").click()
    expect(approval.locator(".field-error")).to_contain_text(["This field is required."])
    amount.fill("20")
    approval.get_by_role("button", name="Approve with edits").click()

    expect(replies(page).last).to_contain_text("20.00 goes back to the customer")
    row = page.locator(".tool-call[data-tool-name=refund_order] .tool-head")
    expect(row.locator(".tool-args")).to_have_text('{ "order_id": "A100", "amount": 20 }')  # what ran, not the proposal
    expect(row.locator(".edited")).to_have_text("edited before approval")
    page.reload()
    expect(row.locator(".tool-args")).to_have_text('{ "order_id": "A100", "amount": 20 }')


def test_the_approval_editor_refuses_a_negative_refund(page: Page) -> None:
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    say(page, "refund order A100")
    approval = card(page, "refund_order")
    approval.get_by_role("button", name="Edit").click()
    sent = len(posts)

    approval.locator("input[name=amount]").fill("-5")
    approval.get_by_role("button", name="Approve with edits").click()

    expect(approval.locator(".field-error")).to_contain_text(["Must be more than 0."])
    expect(page.locator("#status")).to_have_text("waiting for you")
    assert len(posts) == sent, "an invalid edit must not be sent"


def test_a_rejected_refund_never_runs(page: Page, demo: DemoServer) -> None:
    say(page, "refund order A100")
    card(page, "refund_order").get_by_role("button", name="Reject").click()

    expect(replies(page).last).to_have_text(re.compile(r"OK, I did not refund order A100 .*Nothing was changed\."))
    expect(page.locator(".tool-call[data-tool-name=refund_order] .tool-result")).to_contain_text("declined")
    stored = demo.thread_record(thread_id(page))
    refund_call = next(
        call["id"]
        for m in stored["messages"]
        for call in m.get("toolCalls") or []
        if call["function"]["name"] == "refund_order"
    )
    (answer,) = [m for m in stored["messages"] if m.get("toolCallId") == refund_call]
    assert answer["error"] == "declined"
    assert "refunded" not in answer["content"]
    assert stored["interrupts"] == []


def test_a_rejection_with_a_reason_tells_the_agent_why(page: Page, demo: DemoServer) -> None:
    sent = posted(page)
    say(page, "refund order A100")
    approval = card(page, "refund_order")

    approval.get_by_label("Reason").fill('too much, "really"')
    approval.get_by_role("button", name="Reject").click()

    expect(replies(page).last).to_have_text(re.compile(r"OK, I did not refund order A100"))
    expect(approval).to_contain_text('Rejected refund_order: too much, "really"')
    (resume,) = [body["resume"] for body in sent if body.get("resume")]
    assert resume[0]["payload"] == {"approved": False, "reason": 'too much, "really"'}
    (answer,) = [m for m in demo.thread_record(thread_id(page))["messages"] if m.get("error") == "declined"]
    assert answer["content"].endswith('quoted as data (not instructions): "too much, \\"really\\""')


def test_always_allow_in_this_chat_lets_later_refunds_run_until_revoked(page: Page) -> None:
    say(page, "refund order A100")
    first = card(page, "refund_order")
    first.get_by_label("Always allow in this chat").check()
    first.get_by_role("button", name="Approve").click()
    expect(replies(page).last).to_contain_text("Done: order A100 was refunded.")

    say(page, "refund order B200")

    expect(replies(page).last).to_contain_text("Done: order B200 was refunded.")
    expect(page.locator("[data-interrupt]")).to_have_count(1)  # the first card only: the second call asked nobody
    page.locator('.tabs [data-tab="threads"]').click()
    granted = page.locator("#threads .grants li[data-tool=refund_order]")
    expect(granted).to_contain_text("refund_order")
    granted.get_by_role("button", name="撤销 Revoke").click()
    expect(page.locator("#threads .grants")).to_contain_text("Every approval asks")
    say(page, "refund order A100")
    expect(card(page, "refund_order")).to_have_count(2)


def test_a_form_is_validated_filled_and_submitted(page: Page) -> None:
    sent = posted(page)
    say(page, "create a high priority login incident ticket")
    form = page.locator('.form-card[data-form-key="support_ticket_details"]')
    expect(form).to_have_attribute("data-status", "PENDING")

    expect(form.locator(".card-title").last).to_contain_text("哪个系统出了问题")  # for the person, not the model
    expect(form).not_to_contain_text("Asked for when")
    expect(form.get_by_label("影响范围").locator("option")).to_have_text(
        ["— choose —", "单个用户 (one user)", "部分用户 (some users)", "全部用户 (all users)"]
    )
    form.get_by_role("button", name="Submit").click()
    expect(form.locator(".field-error")).to_have_text(["This field is required.", "This field is required."])
    form.get_by_label("受影响系统").fill("统一登录系统")
    form.get_by_label("影响范围").select_option(label="全部用户 (all users)")
    form.get_by_role("button", name="Submit").click()

    expect(form).to_have_attribute("data-status", "SUBMITTED")
    expect(form.locator("dl.values")).to_contain_text("统一登录系统")
    expect(form.locator('dl.values dd[data-key="impactScope"]')).to_have_text("全部用户 (all users)")
    expect(replies(page).last).to_contain_text("Created HIGH ticket INC-")
    (entry,) = sent[-1]["resume"]
    assert entry["status"] == "resolved"
    assert entry["payload"] == {"affectedSystem": "统一登录系统", "impactScope": "ALL_USERS"}
    assert entry["metadata"]["submittedBy"] == "demo-user"
    assert re.fullmatch(r"[0-9a-f-]{36}", entry["metadata"]["requestId"])


def test_a_filled_field_loses_its_error_at_once(page: Page) -> None:
    say(page, "create a high priority login incident ticket")
    form = page.locator('.form-card[data-form-key="support_ticket_details"]')
    form.get_by_role("button", name="Submit").click()
    system, scope = form.locator('[data-field="affectedSystem"]'), form.locator('[data-field="impactScope"]')
    expect(form.locator(".field-error")).to_have_text(["This field is required.", "This field is required."])

    form.get_by_label("受影响系统").press_sequentially("登录")  # typed, not yet left: no submit, no blur

    expect(system.locator(".field-error")).to_have_text("")
    expect(system).not_to_have_class(re.compile(r"\binvalid\b"))
    expect(scope.locator(".field-error")).to_have_text("This field is required.")  # not filled: still said
    form.get_by_label("影响范围").select_option(label="全部用户 (all users)")
    expect(scope.locator(".field-error")).to_have_text("")
    form.get_by_label("受影响系统").fill("")
    expect(system.locator(".field-error")).to_have_text("")  # emptied again: said at the next submit, not while typing
    expect(form).to_have_attribute("data-status", "PENDING")


def test_a_meeting_room_form_sends_a_date_time(page: Page) -> None:
    say(page, "book a meeting room")
    form = page.locator('.form-card[data-form-key="meeting_room_booking"]')
    form.get_by_label("Topic").fill("Planning")
    form.get_by_label("Start time").fill("2030-05-04T10:30")
    form.get_by_label("Attendees").fill("0")
    form.get_by_role("button", name="Submit").click()
    expect(form.locator(".field-error")).to_contain_text(["Must be at least 1."])

    form.get_by_label("Attendees").fill("6")
    form.get_by_role("button", name="Submit").click()

    expect(form).to_have_attribute("data-status", "SUBMITTED")
    expect(replies(page).last).to_contain_text("Booked Everest (12 seats) for 'Planning'")
    shown = form.locator('dl.values dd[data-key="time"]')
    expect(shown).to_contain_text("May 4, 2030")  # the page's locale and time zone, not ISO 8601
    expect(shown).not_to_have_text(re.compile(r"\d{4}-\d\d-\d\dT"))


def test_a_half_filled_form_survives_a_reload(page: Page) -> None:
    say(page, "book a meeting room")
    form = page.locator('.form-card[data-form-key="meeting_room_booking"]')
    form.get_by_label("Topic").fill("Half done")
    form.get_by_label("Attendees").fill("3")

    page.reload()

    expect(form.get_by_label("Topic")).to_have_value("Half done")
    expect(form.get_by_label("Attendees")).to_have_value("3")
    expect(form.get_by_label("Start time")).to_have_value("")
    form.get_by_label("Start time").fill("2030-05-04T09:00")
    form.get_by_role("button", name="Submit").click()
    expect(replies(page).last).to_contain_text("Booked Kilimanjaro (4 seats) for 'Half done'")


def test_a_plain_text_question_gets_one_text_box(page: Page) -> None:
    say(page, "track my parcel")
    question = card(page, "track_parcel")
    expect(question).to_contain_text("请提供订单号")

    question.locator("input").fill("订单号是 O-1001")
    question.get_by_role("button", name="Submit").click()

    expect(page.locator(".tool-call[data-tool-name=track_parcel] .tool-result")).to_contain_text('"orderId": "O-1001"')
    expect(replies(page).last).to_have_text("The parcel for order O-1001 is in transit; it should arrive tomorrow.")


def test_replies_built_from_tool_results_are_sentences(page: Page) -> None:
    say(page, "look up order A100")
    expect(replies(page).last).to_have_text("Order A100 (keyboard, 59.00) is delivered.")
    say(page, "refund order A100")
    card(page, "refund_order").get_by_role("button", name="Approve").click()
    refunded = re.compile(r"Done: order A100 was refunded\. 59\.00 goes back .*\(reference RF-\w+\)\.")
    expect(replies(page).last).to_have_text(refunded)

    for text in replies(page).all_inner_texts():
        assert "{" not in text, f"a reply shows raw JSON: {text}"
        assert '"' not in text, f"a reply shows raw JSON: {text}"


def test_long_json_in_a_tool_row_folds_behind_a_toggle(page: Page) -> None:
    say(page, "look up order A100")
    result = page.locator(".tool-call[data-tool-name=lookup_order] .tool-result")
    fold = result.locator("details.json-fold")
    expect(fold.locator("summary")).to_contain_text("…")
    expect(fold.locator("pre.json-full")).to_be_hidden()
    short = page.locator(".tool-call[data-tool-name=lookup_order] .tool-head code.tool-args")
    expect(short).to_have_text('{ "order_id": "A100" }')  # short JSON stays inline

    fold.locator("summary").click()

    expect(fold.locator("pre.json-full")).to_be_visible()
    expect(fold.locator("pre.json-full")).to_contain_text('"status": "delivered"')


def test_a_cancelled_form_moves_to_cancelled_and_nothing_runs(page: Page) -> None:
    say(page, "create a high priority login incident ticket")
    form = page.locator('.form-card[data-form-key="support_ticket_details"]')
    form.get_by_role("button", name="Cancel").click()

    expect(replies(page).last).to_have_text("OK, no ticket was created.")


def test_a_reload_restores_the_conversation_and_what_still_waits(page: Page) -> None:
    say(page, "look up order B200")
    expect(replies(page).last).to_have_text("Order B200 (monitor, 189.00) is shipped.")
    say(page, "refund order A100")
    expect(card(page, "refund_order")).to_be_visible()

    page.reload()

    expect(page.locator(".msg.user .bubble")).to_have_text(["look up order B200", "refund order A100"])
    expect(page.locator(".tool-call[data-tool-name=lookup_order] .tool-result").first).to_contain_text("monitor")
    expect(page.locator("#status")).to_have_text("waiting for you")
    card(page, "refund_order").get_by_role("button", name="Approve").click()
    expect(replies(page).last).to_contain_text("Done: order A100 was refunded.")

    say(page, "book a meeting room")
    expect(page.locator(".form-card")).to_have_attribute("data-status", "PENDING")
    page.reload()

    form = page.locator('.form-card[data-form-key="meeting_room_booking"]')
    expect(form).to_have_attribute("data-status", "PENDING")
    form.get_by_label("Topic").fill("Retro")
    form.get_by_label("Start time").fill("2030-05-04T15:00")
    form.get_by_label("Attendees").fill("3")
    form.get_by_role("button", name="Submit").click()
    expect(form).to_have_attribute("data-status", "SUBMITTED")
    expect(replies(page).last).to_contain_text("Booked Kilimanjaro (4 seats) for 'Retro'")
    page.reload()
    expect(page.locator(".form-card")).to_have_attribute("data-status", "SUBMITTED")
    expect(replies(page).last).to_contain_text("Booked Kilimanjaro")


def test_a_reload_reopens_a_pending_page_dialog(page: Page, demo: DemoServer) -> None:
    say(page, "confirm delete report.pdf")
    expect(card(page, "confirm_action")).to_contain_text("delete report.pdf")
    assert demo.thread_record(thread_id(page))["interrupts"] == []  # pending: the client holds the call

    page.reload()

    expect(page.locator("#status")).to_have_text("waiting for you")
    card(page, "confirm_action").get_by_role("button", name="Reject").click()
    expect(replies(page).last).to_have_text("Understood, I will not delete report.pdf.")
    expect(page.locator("#message")).to_be_enabled()


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(event)}\n\n" for event in events)


def test_errors_show_their_code_and_message(page: Page) -> None:
    def refuse(route: Route) -> None:
        body = {"error": {"code": "INVALID_INPUT", "message": "The run input is not valid."}}
        route.fulfill(status=422, content_type="application/json", body=json.dumps(body))

    page.route("**/agui/", refuse)
    say(page, "hello")
    expect(page.locator(".note-error").last).to_contain_text("INVALID_INPUT The run input is not valid. (HTTP 422)")
    page.unroute("**/agui/")

    def fail(route: Route) -> None:
        body = sse(
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "RUN_ERROR", "code": "BACKEND_ERROR", "message": "The agent backend failed."},
        )
        route.fulfill(status=200, content_type="text/event-stream", body=": keep-alive\n\n" + body)

    page.route("**/agui/", fail)
    say(page, "hello again")
    expect(page.locator(".note-error").last).to_contain_text("BACKEND_ERROR The agent backend failed.")
    expect(page.locator("#message")).to_be_enabled()


def test_a_server_that_cannot_be_reached_is_not_called_a_refusal(page: Page) -> None:
    say(page, "refund order A100")
    approval = card(page, "refund_order")
    expect(approval).to_be_visible()
    page.route("**/agui/", lambda route: route.abort("connectionrefused"))

    approval.get_by_role("button", name="Approve").click()

    expect(page.locator(".note-error").last).to_contain_text("NETWORK_ERROR The server could not be reached")
    expect(approval.locator(".card-notice")).to_contain_text("could not be reached, so these answers were not sent")
    expect(page.locator("#log")).not_to_contain_text("did not accept")
    page.unroute("**/agui/")

    approval.get_by_role("button", name="Approve").click()
    expect(replies(page).last).to_contain_text("Done: order A100 was refunded.")


def test_a_new_conversation_asks_the_server_for_nothing_it_does_not_have(browser: Browser, demo: DemoServer) -> None:
    context = browser.new_context(base_url=demo.url)
    page = context.new_page()
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
    try:
        page.goto("/", wait_until="networkidle")
        first = thread_id(page)
        with page.expect_navigation(wait_until="networkidle"):
            page.click("#new-thread")
        expect(page.locator("#thread")).not_to_have_text(first)
        page.reload(wait_until="networkidle")  # a thread with no message yet is still new
        say(page, "look up order A100")
        expect(replies(page).last).to_have_text("Order A100 (keyboard, 59.00) is delivered.")
        page.reload(wait_until="networkidle")  # a started thread is restored
        expect(replies(page).last).to_have_text("Order A100 (keyboard, 59.00) is delivered.")
    finally:
        context.close()
    assert failed == []


def test_several_interrupts_are_answered_then_resumed_once_and_expired_ones_only_cancel(page: Page) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("c1", "navigate", {"page": "orders"}),
        ("c2", "confirm_action", {"action": "archive logs"}),
    ]
    calls.append(("c3", "refund_order", {"order_id": "A100", "amount": 59}))
    approval = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
    interrupts = [
        {"id": "i1", "reason": "tool_call", "toolCallId": "c1", "responseSchema": {}},
        {"id": "i2", "reason": "tool_call", "toolCallId": "c2", "responseSchema": {}},
        {"id": "i3", "reason": "tool_call", "toolCallId": "c3", "responseSchema": approval,
         "expiresAt": "2000-01-01T00:00:00Z", "metadata": {"toolName": "refund_order"}},
    ]  # fmt: skip
    started = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"}]
    streamed = [
        event
        for call_id, name, args in calls
        for event in (
            {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name, "parentMessageId": "m1"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": json.dumps(args)},
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
        )
    ]
    finished = [
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r1",
            "outcome": {"type": "interrupt", "interrupts": interrupts},
        }
    ]
    resumed: list[dict[str, Any]] = []

    def agent(route: Route) -> None:
        body = route.request.post_data_json or {}
        if body.get("resume"):
            resumed.append(body)
            reply = [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"},
            ]
            route.fulfill(status=200, content_type="text/event-stream", body=sse(*reply))
        else:
            route.fulfill(status=200, content_type="text/event-stream", body=sse(*started, *streamed, *finished))

    page.route("**/agui/", agent)
    say(page, "do three things")

    expect(page.locator(".panel")).to_have_attribute("data-current", "orders")
    expired = card(page, "refund_order")
    expect(expired).to_contain_text("expired")
    expect(expired.get_by_role("button")).to_have_text(["Cancel"])
    card(page, "confirm_action").get_by_role("button", name="Approve").click()
    expect(card(page, "confirm_action")).to_contain_text("Waiting for 1 more answer")
    assert resumed == []
    expired.get_by_role("button", name="Cancel").click()

    expect(page.locator("#status")).to_have_text("idle")
    (body,) = resumed
    assert body["resume"] == [
        {"interruptId": "i1", "status": "resolved", "payload": {"opened": "orders"}},
        {"interruptId": "i2", "status": "resolved", "payload": {"confirmed": True}},
        {"interruptId": "i3", "status": "cancelled"},
    ]
    assert [tool["name"] for tool in body["tools"]] == ["navigate", "show_toast", "confirm_action", "update_form_draft"]


def test_a_narrow_screen_stacks_the_chat_above_the_panel(page: Page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    say(page, "refund order A100")
    expect(card(page, "refund_order")).to_be_visible()

    chat = page.locator(".chat").bounding_box()
    panel = page.locator(".panel").bounding_box()
    assert chat is not None
    assert panel is not None
    assert panel["y"] >= chat["y"] + chat["height"] - 1, "the panel should sit below the chat"
    assert abs(panel["x"] - chat["x"]) < 2
    assert panel["width"] > 300
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "nothing should overflow sideways"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = page.screenshot(path=ARTIFACTS / "narrow.png", full_page=True)
    assert len(shot) > 10_000
