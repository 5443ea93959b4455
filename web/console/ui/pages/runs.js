// Runs: filter by DAG and state; live by polling; duration and the
// task-state summary of each run.
import { api, serverNow } from "../api.js";
import { badge, esc, fmtDur, fmtTime, secondsBetween, taskSummary } from "../util.js";

const runStates = ["", "queued", "running", "success", "failed", "cancelled"];

function duration(r) {
  if (!r.start_date) return "–";
  const end = r.end_date ? new Date(r.end_date).getTime() : serverNow();
  return fmtDur((end - new Date(r.start_date).getTime()) / 1000);
}

export async function runsPage(ctx, q) {
  const dags = (await api("GET", "/v1/dags")).dags;
  const dag = q.get("dag") || "", st = q.get("state") || "";
  ctx.main.innerHTML = `<h1>Runs</h1>
    <div class="filters">
      <label>DAG <select id="f-dag"><option value="">all</option>${dags.map((d) =>
        `<option ${d.dag_id === dag ? "selected" : ""}>${esc(d.dag_id)}</option>`).join("")}</select></label>
      <label>State <select id="f-state">${runStates.map((s) =>
        `<option value="${s}" ${s === st ? "selected" : ""}>${s || "all"}</option>`).join("")}</select></label>
      <span class="muted" id="updated"></span>
    </div>
    <div class="card"><table id="runs"><thead><tr><th>Run</th><th>DAG</th><th>State</th><th>Type</th><th>Queued</th>
      <th>Started</th><th>Duration</th><th>Tasks</th></tr></thead><tbody></tbody></table></div>`;
  const apply = () => {
    const p = new URLSearchParams();
    const d = document.getElementById("f-dag").value, s = document.getElementById("f-state").value;
    if (d) p.set("dag", d);
    if (s) p.set("state", s);
    location.hash = "#/runs" + (p.toString() ? "?" + p : "");
  };
  document.getElementById("f-dag").onchange = apply;
  document.getElementById("f-state").onchange = apply;
  ctx.every(2000, async () => {
    const p = new URLSearchParams({ limit: "200" });
    if (dag) p.set("dag_id", dag);
    if (st) p.set("state", st);
    const runs = (await api("GET", "/v1/runs?" + p)).runs;
    if (!ctx.live()) return;
    const body = document.querySelector("#runs tbody");
    body.innerHTML = runs.length === 0 ? `<tr><td colspan="8" class="muted">No runs${dag || st ? " match" : " yet"}.</td></tr>` :
      runs.map((r) => `<tr data-run-id="${r.id}" data-run-state="${esc(r.state)}">
        <td><a href="#/runs/${r.id}">#${r.id}</a></td><td><a href="#/dags/${encodeURIComponent(r.dag_id)}">${esc(r.dag_id)}</a></td>
        <td>${badge(r.state)}${r.reason ? ` <span class="muted">${esc(r.reason)}</span>` : ""}</td>
        <td>${esc(r.run_type || "manual")}</td><td>${fmtTime(r.queued_at)}</td><td>${fmtTime(r.start_date)}</td>
        <td>${duration(r)}</td><td>${taskSummary(r.task_counts)}</td></tr>`).join("");
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString(undefined, { hour12: false });
  });
}

export { duration, secondsBetween };
