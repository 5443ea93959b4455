// Notifications: the outbox's deliveries, newest first, with each one's
// event, run, webhook, attempts and last error (docs/notifications.md).
// Errors are the server's bounded text: never a URL, secret or more than
// a short excerpt of a receiver's reply.
import { api } from "../api.js";
import { badge, esc, fmtTime } from "../util.js";

const states = ["", "pending", "delivered", "dead"];

export async function notificationsPage(ctx, q) {
  const want = states.includes(q.get("state") || "") ? q.get("state") || "" : "";
  ctx.main.innerHTML = `<h1>Notifications</h1>
    <p class="muted">Webhook deliveries of the notification outbox, newest first. A pending one is retried with back-off
    until <code>--notify-max-age</code>, then dead.</p>
    <p id="notify-filter">${states.map((s) => `<a href="#/notifications${s ? `?state=${s}` : ""}" class="pill${s === want ? " active" : ""}"
      data-filter="${s || "all"}">${s || "all"}</a>`).join(" ")}</p>
    <div class="card"><table id="notifications"><thead><tr><th>#</th><th>Event</th><th>Run</th><th>Task</th><th>Webhook</th>
      <th>Delivery</th><th>Attempts</th><th>Raised</th><th>Next / finished</th><th>Last error</th></tr></thead><tbody></tbody></table></div>`;
  ctx.every(2000, async () => {
    const list = (await api("GET", `/v1/notifications?limit=100${want ? `&state=${want}` : ""}`)).notifications;
    if (!ctx.live()) return;
    const body = document.querySelector("#notifications tbody");
    if (!body) return;
    body.innerHTML = list.length === 0 ? `<tr><td colspan="10" class="muted">No notification${want ? ` is ${esc(want)}` : " yet"}.</td></tr>` :
      list.map((n) => `<tr data-notification="${n.id}" data-delivery="${esc(n.delivery_id)}">
        <td>${n.id}</td><td><strong>${esc(n.event)}</strong></td>
        <td><a href="#/runs/${n.run_id}">${esc(n.dag_id)} #${n.run_id}</a></td>
        <td>${n.task_id ? `${esc(n.task_id)} <span class="muted">try ${n.try_number}</span>` : "–"}</td>
        <td>${esc(n.webhook)}</td><td>${badge(n.state)}</td><td>${n.attempts}</td><td>${fmtTime(n.created_at)}</td>
        <td>${fmtTime(n.state === "pending" ? n.next_attempt_at : n.finished_at)}</td>
        <td class="muted">${esc(n.last_error || (n.last_status ? `HTTP ${n.last_status}` : "–"))}</td></tr>`).join("");
  });
}
