// A DAG's history, from GET /v1/dags/{id}/grid: the grid of its last
// runs × its tasks (each cell a TI's state as a colour and a symbol,
// linking to that try) and the run-duration chart, both oldest run on
// the left, newest on the right, as in Airflow's grid.
import { badge, esc, fmtDur, fmtTime, secondsBetween, stateSymbol } from "./util.js";

// gridLimits are the choices of the "Runs" control (the API allows 1..100).
export const gridLimits = [10, 25, 50, 100];

// gridLimit reads the control's value from the page's address (?runs=N),
// falling back to the API's default for anything not offered.
export function gridLimit(q) {
  const n = Number(q.get("runs"));
  return gridLimits.includes(n) ? n : 25;
}

// tasksOf is the grid's rows: the spec's tasks, then any task an older
// run had that the spec no longer does.
function tasksOf(grid) {
  const rows = [...grid.tasks];
  const seen = new Set(rows);
  for (const r of grid.runs) {
    for (const ti of r.task_instances) if (!seen.has(ti.task_id)) { seen.add(ti.task_id); rows.push(ti.task_id); }
  }
  return rows;
}

function cell(run, task, ti) {
  if (!ti) return `<td class="cell" data-run-id="${run.id}" data-task="${esc(task)}" data-state="" title="run #${run.id} has no task ${esc(task)}">·</td>`;
  const state = ti.state || "none";
  const what = `${task} in run #${run.id}: ${state.replaceAll("_", " ")}${ti.try_number ? `, try ${ti.try_number}` : ""}`;
  const href = ti.try_number ? `#/runs/${run.id}/logs/${encodeURIComponent(task)}?try=${ti.try_number}` : `#/runs/${run.id}`;
  return `<td class="cell"><a class="s-${esc(state)}" href="${href}" data-run-id="${run.id}" data-task="${esc(task)}" data-state="${esc(state)}"
    data-try="${ti.try_number}" title="${esc(what)}" aria-label="${esc(what)}">${stateSymbol(state)}</a></td>`;
}

// renderGrid draws grid (a DAGGrid) as a table: a row per task, a column
// per run.
export function renderGrid(el, grid) {
  if (!grid.runs.length) {
    el.innerHTML = `<p class="muted" data-grid="empty">This DAG has no runs yet.</p>`;
    return;
  }
  const runs = [...grid.runs].reverse();
  const byRun = new Map(runs.map((r) => [r.id, new Map(r.task_instances.map((t) => [t.task_id, t]))]));
  const head = runs.map((r) => `<th class="cell" data-run-id="${r.id}"><a class="s-${esc(r.state)}" href="#/runs/${r.id}"
    title="run #${r.id} (${esc(r.run_type)}): ${esc(r.state)}, queued ${esc(fmtTime(r.queued_at))}">${stateSymbol(r.state)}<br><span class="runid">${r.id}</span></a></th>`).join("");
  const body = tasksOf(grid).map((task) => `<tr data-task="${esc(task)}"><th class="task">${esc(task)}</th>${
    runs.map((r) => cell(r, task, byRun.get(r.id).get(task))).join("")}</tr>`).join("");
  const states = new Set(runs.flatMap((r) => [r.state, ...r.task_instances.map((t) => t.state)]));
  el.innerHTML = `<table id="grid" class="gridview" data-runs="${runs.length}" data-limit="${grid.limit}"><thead><tr><th class="task">Task \\ run</th>${head}</tr></thead>
    <tbody>${body}</tbody></table>
    <p class="muted legend">${[...states].map((s) => badge(s)).join(" ")}${grid.truncated ? " · older runs were left out: their tasks passed the bound of 10,000 cells" : ""}</p>`;
}

// runSeconds is how long a run ran: to its end, or to now while it runs;
// null before it started.
function runSeconds(r, now) {
  if (!r.start_date) return null;
  return secondsBetween(r.start_date, r.end_date || new Date(now).toISOString());
}

// renderDurations draws the runs' durations as SVG bars, one per run,
// each coloured and marked with the run's state and linking to the run.
export function renderDurations(el, grid, now) {
  if (!grid.runs.length) {
    el.innerHTML = `<p class="muted" data-durations="empty">No runs yet.</p>`;
    return;
  }
  const runs = [...grid.runs].reverse().map((r) => ({ ...r, secs: runSeconds(r, now) }));
  const maxSecs = Math.max(1, ...runs.map((r) => r.secs || 0));
  const barW = 22, gap = 8, left = 56, plotH = 140, top = 14;
  const width = left + runs.length * (barW + gap) + 10, height = top + plotH + 40;
  const bars = runs.map((r, i) => {
    const x = left + i * (barW + gap);
    const h = r.secs == null ? 0 : Math.max(2, (r.secs / maxSecs) * plotH);
    const y = top + plotH - h;
    const what = `run #${r.id}: ${r.state}, ${r.secs == null ? "not started" : `${r.end_date ? "ran" : "running for"} ${fmtDur(r.secs)}`}`;
    return `<a href="#/runs/${r.id}"><g class="dur s-${esc(r.state)}" data-run-id="${r.id}" data-run-state="${esc(r.state)}"
      data-seconds="${r.secs == null ? "" : r.secs.toFixed(3)}"><title>${esc(what)}</title>
      ${r.secs == null ? `<rect class="unstarted" x="${x}" y="${top + plotH - 2}" width="${barW}" height="2"/>` : `<rect x="${x}" y="${y.toFixed(1)}" width="${barW}" height="${h.toFixed(1)}"/>`}
      <text x="${x + barW / 2}" y="${top + plotH + 14}" text-anchor="middle">${stateSymbol(r.state)}</text>
      <text class="runid" x="${x + barW / 2}" y="${top + plotH + 28}" text-anchor="middle">${r.id}</text></g></a>`;
  }).join("");
  el.innerHTML = `<svg role="img" aria-label="durations of the last ${runs.length} runs" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}"
    data-dur-bars="${runs.length}">
    <line class="tick" x1="${left - 4}" x2="${width}" y1="${top}" y2="${top}"/><text class="axis" x="${left - 8}" y="${top + 4}" text-anchor="end">${esc(fmtDur(maxSecs))}</text>
    <line class="tick" x1="${left - 4}" x2="${width}" y1="${top + plotH}" y2="${top + plotH}"/><text class="axis" x="${left - 8}" y="${top + plotH + 4}" text-anchor="end">0</text>
    ${bars}</svg>`;
}
