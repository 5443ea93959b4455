// The audit log (docs/security.md "The audit log"), for the admin role:
// every state-changing call, allowed or refused, newest first, filtered
// by actor, target prefix and age; a page of 100 rows, "Older" reads on
// with the cursor. The first page is re-read every 5 s.
import { api } from "../api.js";
import { esc, fmtTime } from "../util.js";

const pageSize = 100;

export async function auditPage(ctx) {
  ctx.main.innerHTML = `<h1>Audit log</h1>
    <p class="muted">Every state-changing call but the agents', allowed or refused, with who made it. A change's row is written
    in the change's own transaction.</p>
    <form class="card filters" id="audit-filter">
      <label>Actor <input name="actor" id="audit-actor" maxlength="128" placeholder="any"></label>
      <label>Target <input name="target" id="audit-target" maxlength="256" placeholder="runs/42, dags/etl, secrets"></label>
      <label>Since <input name="since" id="audit-since" placeholder="24h, or 2026-11-27T00:00:00Z"></label>
      <button class="primary" type="submit">Filter</button></form>
    <div class="card"><table id="audit"><thead><tr><th>At</th><th>Actor</th><th>Role</th><th>Route</th><th>Target</th>
      <th>Result</th><th>Client</th><th>Request</th><th>Message</th></tr></thead><tbody></tbody></table>
      <p><button type="button" id="audit-older" hidden>Older</button></p></div>`;
  let filter = new URLSearchParams(), before = null, next = null;
  const query = () => {
    const q = new URLSearchParams(filter);
    q.set("limit", pageSize);
    if (before != null) q.set("before", before);
    return q.toString();
  };
  const draw = (records) => {
    const body = document.querySelector("#audit tbody");
    if (!body) return;
    body.innerHTML = records.length === 0 ? `<tr><td colspan="9" class="muted">No call matches.</td></tr>` :
      records.map((r) => `<tr data-audit="${r.id}" data-result="${esc(r.result)}"><td>${esc(fmtTime(r.at))}</td>
        <td><strong>${esc(r.actor)}</strong>${r.auth ? ` <span class="muted">${esc(r.auth)}</span>` : ""}</td>
        <td>${esc(r.role || "–")}</td><td><code>${esc(r.route)}</code></td><td>${esc(r.target || "–")}</td>
        <td><span class="badge s-${r.result === "ok" ? "success" : "failed"}">${esc(r.result)}${r.status ? " " + r.status : ""}</span></td>
        <td>${esc(r.client || "–")}</td><td class="muted">${esc(r.request_id || "–")}</td><td>${esc(r.message || "")}</td></tr>`).join("");
    const older = document.getElementById("audit-older");
    if (older) older.hidden = next == null;
  };
  const load = async () => {
    const page = await api("GET", `/v1/audit?${query()}`);
    next = page.next_cursor;
    if (ctx.live()) draw(page.records);
  };
  document.getElementById("audit-filter").onsubmit = (ev) => {
    ev.preventDefault();
    filter = new URLSearchParams();
    for (const k of ["actor", "target", "since"]) {
      const v = document.getElementById(`audit-${k}`).value.trim();
      if (v) filter.set(k, v);
    }
    before = null;
    load().catch((e) => { document.querySelector("#audit tbody").innerHTML = `<tr><td colspan="9">${esc(e.message)}</td></tr>`; });
  };
  document.getElementById("audit-older").onclick = () => { before = next; load(); };
  ctx.every(5000, async () => { if (before == null) await load(); });
}
