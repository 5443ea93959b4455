// At risk: what a reaper will act on if nothing changes, with the time
// left before it does (GET /v1/at-risk; the reapers' own queries).
import { api, serverNow } from "../api.js";
import { esc, fmtClock, fmtDur, parseDur } from "../util.js";

// left is the time left of dur measured from asOf (the report's now), on
// the server's clock; the run page's overdue hint uses it too.
export function left(asOf, dur) {
  const secs = parseDur(dur) - (serverNow() - new Date(asOf).getTime()) / 1000;
  return secs <= 0 ? `<strong>now</strong> (next sweep)` : fmtDur(secs);
}

export async function atRiskPage(ctx) {
  ctx.main.innerHTML = `<h1>At risk</h1><p class="muted">Work a reaper will act on if nothing changes. Nothing here has been reaped yet.</p>
    <div id="grace"></div>
    <h2>Running, heartbeat overdue</h2><div class="card" id="risk-running"></div>
    <h2>Queued, no active agent can take it</h2><div class="card" id="risk-queued"></div>
    <h2>Runs nearing their timeout</h2><div class="card" id="risk-runs"></div>`;
  let rep = null;
  const draw = () => {
    if (!rep || !document.getElementById("risk-running")) return;
    document.getElementById("grace").innerHTML = (rep.grace || []).map((g) => `<p class="muted">⏸ ${esc(g.reaper)}: ${esc(g.message)}</p>`).join("");
    document.getElementById("risk-running").innerHTML = rep.running.length === 0 ? `<p class="muted">None: every running task heartbeats on time.</p>` :
      `<table><thead><tr><th>Run</th><th>Task</th><th>Try</th><th>Agent</th><th>Last heartbeat</th><th>Overdue by</th><th>Time left before agent_lost</th><th>Then</th></tr></thead><tbody>${
        rep.running.map((r) => `<tr data-risk="running" data-run-id="${r.run_id}" data-task="${esc(r.task_id)}"><td><a href="#/runs/${r.run_id}">#${r.run_id}</a></td>
          <td>${esc(r.task_id)}</td><td>${r.try_number}</td><td>#${r.agent_id ?? "?"}</td><td>${fmtClock(r.last_heartbeat_at)}</td>
          <td>${fmtDur(parseDur(r.overdue))}</td><td>${left(rep.now, r.time_left)}</td><td class="why">${esc(r.decision)}: ${esc(r.outcome)}</td></tr>`).join("")}</tbody></table>`;
    document.getElementById("risk-queued").innerHTML = rep.queued.length === 0 ? `<p class="muted">None: an active agent can take every queued task.</p>` :
      `<table><thead><tr><th>Run</th><th>Task</th><th>Queued</th><th>Missing tags</th><th>Active agents</th><th>Time left before dispatch_lost</th></tr></thead><tbody>${
        rep.queued.map((q) => `<tr data-risk="queued" data-run-id="${q.run_id}" data-task="${esc(q.task_id)}"><td><a href="#/runs/${q.run_id}">#${q.run_id}</a></td>
          <td>${esc(q.task_id)}</td><td>${fmtClock(q.queued_at)}</td>
          <td>${q.missing_tags.length ? q.missing_tags.map((t) => `<span class="pill">${esc(t)}</span>`).join("") : `no single agent offers all of ${esc(q.required_tags.join(", "))}`}</td>
          <td>${q.active_agents}</td><td>${left(rep.now, q.time_left)}</td></tr>`).join("")}</tbody></table>`;
    document.getElementById("risk-runs").innerHTML = rep.runs.length === 0 ? `<p class="muted">None within ${esc(rep.run_horizon)}.</p>` :
      `<table><thead><tr><th>Run</th><th>DAG</th><th>State</th><th>Timeout</th><th>Deadline</th><th>Time left</th></tr></thead><tbody>${
        rep.runs.map((r) => `<tr data-risk="run" data-run-id="${r.run_id}"><td><a href="#/runs/${r.run_id}">#${r.run_id}</a></td><td>${esc(r.dag_id)}</td>
          <td>${esc(r.state)}</td><td>${esc(r.timeout)}</td><td>${fmtClock(r.deadline)}</td><td>${left(rep.now, r.time_left)}</td></tr>`).join("")}</tbody></table>`;
  };
  ctx.every(2000, async () => { rep = await api("GET", "/v1/at-risk"); if (ctx.live()) draw(); });
  ctx.every(1000, async () => { if (ctx.live()) draw(); });
}
