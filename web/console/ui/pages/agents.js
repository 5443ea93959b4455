// Agents: state, tags, capacity, running count, the live age of the last
// heartbeat, and the attempts each one runs now.
import { api, getRun, serverNow } from "../api.js";
import { badge, esc, fmtDur } from "../util.js";

export async function agentsPage(ctx) {
  ctx.main.innerHTML = `<h1>Agents</h1><div class="card"><table id="agents"><thead><tr><th>Agent</th><th>State</th><th>Tags</th>
    <th>Capacity</th><th>Running</th><th>Last heartbeat</th><th>Running attempts</th></tr></thead><tbody></tbody></table>
    <p id="agents-more" class="muted" hidden></p></div>`;
  // One bounded page, newest first: the page polls every 2 s, so it never
  // asks for every agent there is (docs/security.md).
  const pageSize = 100;
  let agents = [], more = false, running = new Map();
  const draw = () => {
    const body = document.querySelector("#agents tbody");
    if (!body) return;
    body.innerHTML = agents.length === 0 ? `<tr><td colspan="7" class="muted">No agent has registered.</td></tr>` :
      agents.map((a) => {
        const age = (serverNow() - new Date(a.last_heartbeat_at).getTime()) / 1000;
        const atts = running.get(a.id) || [];
        return `<tr data-agent="${esc(a.name)}"><td><strong>${esc(a.name)}</strong> <span class="muted">#${a.id}</span></td><td>${badge(a.state)}</td>
          <td>${(a.tags || []).map((t) => `<span class="pill">${esc(t)}</span>`).join("") || '<span class="muted">none</span>'}</td>
          <td>${a.capacity}</td><td>${a.running}</td><td data-heartbeat-age="${age.toFixed(0)}">${fmtDur(age)} ago</td>
          <td>${atts.map((t) => `<a href="#/runs/${t.run_id}/logs/${encodeURIComponent(t.task_id)}?try=${t.try_number}">run ${t.run_id} ${esc(t.task_id)} try ${t.try_number}</a>`).join("<br>") || "–"}</td></tr>`;
      }).join("");
    const note = document.querySelector("#agents-more");
    if (note) {
      note.hidden = !more;
      note.textContent = more ? `Showing the ${pageSize} most recently registered agents; vigil agents list shows them all.` : "";
    }
  };
  ctx.every(2000, async () => {
    const page = await api("GET", `/v1/agents?limit=${pageSize}`);
    agents = page.agents;
    more = page.next_cursor != null;
    const runs = (await api("GET", "/v1/runs?state=running&limit=50")).runs;
    const details = await Promise.all(runs.map((r) => getRun(r.id).catch(() => null)));
    running = new Map();
    for (const d of details) for (const t of d?.task_instances || []) {
      if (t.state === "running" && t.agent_id != null) {
        if (!running.has(t.agent_id)) running.set(t.agent_id, []);
        running.get(t.agent_id).push(t);
      }
    }
    if (ctx.live()) draw();
  });
  ctx.every(1000, async () => { if (ctx.live()) draw(); });
}
