// The panel's list of conversations (GET /threads): open one, rename it, delete it.

import { h } from "./dom.js";
import { deleteThread, listThreads, renameThread } from "./agui-client.js";
import { localTime } from "./schema-form.js";

/**
 * Fill `root` with the caller's threads, newest first, and return `refresh()`. `current` is the page's thread;
 * `open(threadId)` switches to another; `forgotten()` runs when the page's own thread was deleted.
 */
export function threadList(root, { base, current, open, forgotten }) {
  const list = h("ul", { class: "threads" });
  const problem = h("p", { class: "field-error", role: "alert" });
  root.replaceChildren(h("h2", {}, "会话 Conversations"), list, problem);

  async function refresh() {
    try {
      const { threads } = await listThreads(base);
      problem.textContent = "";
      list.replaceChildren(...threads.map(item));
      if (!threads.length) list.append(h("li", { class: "hint" }, "还没有会话。No conversation yet."));
    } catch (error) {
      problem.textContent = `${error.code ?? "ERROR"}: ${error.message}`;
    }
  }

  function item({ threadId, title, updatedAt, interrupts }) {
    const mine = threadId === current;
    const waiting = interrupts?.length ? h("span", { class: "status status-pending" }, "等待回答 Waiting for you") : null;
    return h("li", { class: mine ? "current" : "", "data-thread-id": threadId, "aria-current": mine ? "true" : null }, [
      h("button", { type: "button", class: "quiet thread-open", onclick: () => mine || open(threadId) }, [
        title ?? "(无标题 Untitled)",
      ]),
      waiting,
      h("span", { class: "hint" }, localTime(updatedAt)),
      h("span", { class: "thread-actions" }, [
        h("button", { type: "button", class: "quiet", onclick: () => rename(threadId, title) }, "重命名 Rename"),
        h("button", { type: "button", class: "quiet danger", onclick: () => remove(threadId, title, mine) }, "删除 Delete"),
      ]),
    ]);
  }

  async function rename(threadId, title) {
    const typed = prompt("新标题（留空则用默认标题）New title (empty: the default title)", title ?? "");
    if (typed === null) return;
    await act(() => renameThread(base, threadId, typed.trim() || null));
  }

  async function remove(threadId, title, mine) {
    if (!confirm(`删除「${title ?? threadId}」？Delete this conversation?`)) return;
    if ((await act(() => deleteThread(base, threadId))) && mine) forgotten();
  }

  async function act(change) {
    try {
      await change();
    } catch (error) {
      problem.textContent = `${error.code ?? "ERROR"}: ${error.message}`;
      return false;
    }
    await refresh();
    return true;
  }

  return refresh;
}
