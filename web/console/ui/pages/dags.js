// DAGs: the list with each DAG's pause state and a trigger button, and a
// DAG's page with its pause state, pause/unpause and its run parameters
// (the spec's params, with their types and defaults).
import { api, serverNow } from "../api.js";
import { esc, errorBox, fmtTime, readOnly } from "../util.js";
import { gridLimit, gridLimits, renderDurations, renderGrid } from "../history.js";

// pausedBadge tells the pause state in words and a symbol, not colour alone.
export function pausedBadge(paused) {
  return paused ? `<span class="badge s-cancelled" data-paused="true"><span aria-hidden="true">⏸</span>paused</span>`
    : `<span class="badge s-active" data-paused="false"><span aria-hidden="true">●</span>active</span>`;
}

export async function dagsPage(ctx) {
  const dags = (await api("GET", "/v1/dags")).dags;
  const ro = ctx.session.viewer ? readOnly : "";
  ctx.main.innerHTML = `<h1>DAGs</h1><div class="card"><table><thead><tr><th>DAG</th><th>Tasks</th><th>State</th><th>Updated</th><th></th></tr></thead><tbody>${
    dags.map((d) => `<tr data-dag="${esc(d.dag_id)}"><td><a href="#/dags/${encodeURIComponent(d.dag_id)}">${esc(d.dag_id)}</a></td><td>${d.tasks}</td>
      <td>${pausedBadge(d.paused)}</td><td>${fmtTime(d.updated_at)}</td><td><a href="#/runs?dag=${encodeURIComponent(d.dag_id)}">runs</a>
      <a href="#/dags/${encodeURIComponent(d.dag_id)}"><button${ro}>Trigger…</button></a></td></tr>`).join("")}</tbody></table></div>`;
}

function input(name, p) {
  const def = p.default ?? "";
  if (p.type === "bool") return `<label>${esc(name)} (bool)<select name="${esc(name)}"><option value="">default (${esc(String(def))})</option><option>true</option><option>false</option></select></label>`;
  return `<label>${esc(name)} (${esc(p.type)})<input name="${esc(name)}" placeholder="default: ${esc(String(def))}"></label>`;
}

function value(type, raw) {
  if (type === "int" || type === "float") { const n = Number(raw); return Number.isNaN(n) ? raw : n; }
  if (type === "bool") return raw === "true";
  return raw;
}

export async function dagPage(ctx, dagID, q) {
  const dag = await api("GET", `/v1/dags/${encodeURIComponent(dagID)}`);
  const spec = dag.spec || {};
  const params = spec.params || {};
  const ro = ctx.session.viewer ? readOnly : "";
  ctx.main.innerHTML = `<h1>DAG ${esc(dagID)}</h1>
    <div class="card"><dl class="kv"><dt>Schedule state</dt><dd id="dag-paused"></dd>
    <dt>Tasks</dt><dd id="dag-tasks">${(spec.tasks || []).map((t) => `${esc(t.id)}${t.depends_on ? ` ← ${esc(t.depends_on.join(", "))}` : ""}${t.trigger_rule ? ` (${esc(t.trigger_rule)})` : ""}${t.skip_exit_code ? ` [skip on exit ${esc(String(t.skip_exit_code))}]` : ""}`).join("<br>")}</dd>
    <dt>Schedule</dt><dd>${esc(spec.schedule || "manual only")}</dd><dt>Timeout</dt><dd>${esc(spec.timeout || "none")}</dd></dl>
    <div class="actions"><button id="pause-dag"${ro}>Pause</button><button id="unpause-dag"${ro}>Unpause</button>
    <span class="muted">A paused DAG's schedule creates no runs; triggers and backfills still do.</span></div><div id="pause-error"></div></div>
    <form class="card" id="trigger"><h2>Trigger a run</h2>${Object.keys(params).length ? Object.entries(params).map(([n, p]) => input(n, p)).join("") :
      '<p class="muted">This DAG declares no run parameters.</p>'}
      <div class="actions"><button class="primary" type="submit" id="trigger-run"${ro}>Trigger</button> <a href="#/runs?dag=${encodeURIComponent(dagID)}">its runs</a></div>
      <div id="trigger-error"></div></form>`;
  history(ctx, dagID, q);
  const showPaused = (paused) => {
    document.getElementById("dag-paused").innerHTML = pausedBadge(paused);
    if (ctx.session.viewer) return;
    document.getElementById("pause-dag").disabled = paused;
    document.getElementById("unpause-dag").disabled = !paused;
  };
  showPaused(dag.paused);
  for (const [id, verb] of [["pause-dag", "pause"], ["unpause-dag", "unpause"]]) {
    document.getElementById(id).onclick = async () => {
      const err = document.getElementById("pause-error");
      try {
        const r = await api("POST", `/v1/dags/${encodeURIComponent(dagID)}/${verb}`);
        err.innerHTML = "";
        showPaused(r.paused);
      } catch (e) { err.innerHTML = errorBox(e); }
    };
  }
  document.getElementById("trigger").onsubmit = async (ev) => {
    ev.preventDefault();
    const conf = {};
    for (const [n, p] of Object.entries(params)) {
      const raw = ev.target.elements[n].value.trim();
      if (raw !== "") conf[n] = value(p.type, raw);
    }
    try {
      const r = await api("POST", `/v1/dags/${encodeURIComponent(dagID)}/runs`, Object.keys(conf).length ? { conf } : undefined);
      location.hash = `#/runs/${r.id}`;
    } catch (e) { document.getElementById("trigger-error").innerHTML = errorBox(e); }
  };
}

// history adds the grid of the DAG's last runs and their durations to its
// page, polled every 2 s like the runs list; the "Runs" control puts its
// choice in the address (?runs=N).
function history(ctx, dagID, q) {
  const limit = gridLimit(q);
  document.getElementById("trigger").insertAdjacentHTML("beforebegin", `<h2>Last runs</h2><div class="card"><div class="filters">
    <label>Runs <select id="grid-limit">${gridLimits.map((n) => `<option${n === limit ? " selected" : ""}>${n}</option>`).join("")}</select></label>
    <span class="muted">each cell is one task instance; it opens that try's logs</span></div><div id="grid-view"></div></div>
    <h2>Run durations</h2><div class="card" id="durations"></div>`);
  document.getElementById("grid-limit").onchange = (ev) => {
    location.hash = `#/dags/${encodeURIComponent(dagID)}?runs=${ev.target.value}`;
  };
  ctx.every(2000, async () => {
    const grid = await api("GET", `/v1/dags/${encodeURIComponent(dagID)}/grid?limit=${limit}`);
    if (!ctx.live()) return;
    renderGrid(document.getElementById("grid-view"), grid);
    renderDurations(document.getElementById("durations"), grid, serverNow());
  });
}
