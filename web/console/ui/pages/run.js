// Run detail: the graph, each TI's attempts, the event timeline with
// every recovery decision marked and explained, and the run's actions.
import { api, allEvents, getRun, serverNow } from "../api.js";
import { isDecision } from "../decisions.js";
import { renderGraph } from "../graph.js";
import { renderGantt } from "../gantt.js";
import { clearButton, markButtons, wireRerun } from "../rerun.js";
import { outputsRow, runOutputs } from "../outputs.js";
import { badge, esc, errorBox, fmtClock, fmtDur, fmtTime, parseDur, readOnly } from "../util.js";
import { duration } from "./runs.js";
import { left } from "./atrisk.js";

const ends = new Set(["ti_success", "ti_failed", "ti_up_for_retry", "ti_cancelled", "ti_upstream_failed", "ti_skipped"]);
// Ends written by the agent's completion, which proves the process started.
const completed = new Set(["ti_success", "ti_failed", "ti_up_for_retry", "ti_skipped"]);

// attempts groups a run's events by attempt id: claimed, started and
// ended times, agent, try and the event that ended it. An attempt whose
// start the agent reported with its completion (docs/design.md §4
// heartbeat) has no ti_started event: it started when it ended.
export function attempts(events) {
  const by = new Map();
  for (const e of events) {
    if (!e.attempt_id) continue;
    let a = by.get(e.attempt_id);
    if (!a) {
      a = { attempt: e.attempt_id, task: e.task_id, try: e.try_number, agent: e.agent_id };
      by.set(e.attempt_id, a);
    }
    if (e.agent_id != null && a.agent == null) a.agent = e.agent_id;
    if (e.kind === "ti_claimed") a.claimed = e.time;
    else if (e.kind === "ti_started") a.started = e.time;
    else if (ends.has(e.kind) || isDecision(e.kind)) { a.ended = a.ended || e.time; a.reason = e.kind; a.message = e.message; }
  }
  for (const a of by.values()) {
    if (!a.started && a.ended && completed.has(a.reason)) a.started = a.ended;
  }
  return [...by.values()];
}

// explain puts a recovery decision in words: who went silent, since when,
// and where the task went next.
export function explain(e, events, agentName) {
  let text = `${e.kind}: ${e.message}`;
  const silent = /silent for ([0-9hms.]+)/.exec(e.message || "");
  if (silent && e.agent_id != null) {
    const secs = parseDur(silent[1]);
    const last = new Date(new Date(e.time).getTime() - secs * 1000);
    const rest = e.message.slice(e.message.indexOf(";") >= 0 ? e.message.indexOf(";") : e.message.length);
    text = `${e.kind}: agent ${agentName(e.agent_id)} silent for ${fmtDur(secs)} after its last heartbeat at ${fmtClock(last)}${rest}`;
  }
  const next = events.find((x) => x.kind === "ti_claimed" && x.task_id === e.task_id && x.id > e.id);
  if (next && e.task_id) text += `; retried on agent ${agentName(next.agent_id)} (try ${next.try_number})`;
  return text;
}

export async function runPage(ctx, runID) {
  ctx.main.innerHTML = `<div id="run-head"></div>
    <div class="actions" id="run-actions"></div><div id="action-error"></div><div id="confirm-panel"></div>
    <div class="card graph" id="graph"></div>
    <h2>Tries over time</h2><div class="card gantt" id="gantt"></div>
    <div class="grid2"><div><h2>Task instances and attempts</h2><div class="card" id="tis"></div></div>
    <div><h2>Timeline</h2><div class="card" id="timeline"></div></div></div>`;
  let dagDeps = null;
  let agents = new Map();
  let current = null;
  wireRerun(document.getElementById("run-actions"), document.getElementById("tis"), document.getElementById("confirm-panel"), () => current);
  ctx.every(2000, async () => {
    const run = await getRun(runID);
    if (dagDeps === null) {
      dagDeps = {};
      const dag = await api("GET", `/v1/dags/${encodeURIComponent(run.dag_id)}`).catch(() => null);
      for (const t of dag?.spec?.tasks || []) dagDeps[t.id] = t.depends_on || [];
    }
    // The run's share of the at-risk report: its overdue heartbeats, in
    // the reapers' own words (GET /v1/at-risk?run_id=N).
    const [events, agentList, risk, outs] = await Promise.all([allEvents(runID), api("GET", "/v1/agents"),
      api("GET", `/v1/at-risk?run_id=${runID}`), runOutputs(runID)]);
    agents = new Map(agentList.agents.map((a) => [a.id, a.name]));
    if (!ctx.live()) return;
    current = run;
    const name = (id) => (id == null ? "?" : agents.has(id) ? `${agents.get(id)} (#${id})` : `#${id}`);
    head(run);
    actions(ctx, run);
    const tasks = Object.fromEntries(run.task_instances.map((t) => [t.task_id, t.state]));
    await renderGraph(document.getElementById("graph"), runID, tasks, dagDeps);
    const atts = attempts(events);
    renderGantt(document.getElementById("gantt"), run, atts, serverNow());
    tiTable(ctx, run, atts, name, risk, outs);
    timeline(events, name);
  });
}

function head(run) {
  const conf = run.conf && Object.keys(run.conf).length ? ` · conf <code>${esc(JSON.stringify(run.conf))}</code>` : "";
  document.getElementById("run-head").innerHTML = `<h1>Run #${run.id} <a href="#/dags/${encodeURIComponent(run.dag_id)}">${esc(run.dag_id)}</a>
    <span data-run-state="${esc(run.state)}">${badge(run.state)}</span></h1>
    <p class="muted">${esc(run.run_type || "manual")} · queued ${fmtTime(run.queued_at)} · started ${fmtTime(run.start_date)} ·
    ended ${fmtTime(run.end_date)} · duration ${duration(run)}${conf}${run.message ? ` · ${run.reason ? esc(run.reason) + ": " : ""}${esc(run.message)}` : ""}</p>`;
}

function actions(ctx, run) {
  const el = document.getElementById("run-actions");
  const terminal = ["success", "failed", "cancelled"].includes(run.state);
  const ro = ctx.session.viewer ? readOnly : "";
  el.innerHTML = `<button class="danger" id="cancel-run"${ro}${terminal && !ro ? " disabled" : ""}>Cancel run</button>
    <button id="trigger-again"${ro}>Trigger again</button> ${clearButton(ctx, run)}`;
  const err = document.getElementById("action-error");
  document.getElementById("cancel-run").onclick = async () => {
    if (!confirm(`Cancel run #${run.id}?`)) return;
    try { await api("POST", `/v1/runs/${run.id}/cancel`); err.innerHTML = ""; } catch (e) { err.innerHTML = errorBox(e); }
  };
  document.getElementById("trigger-again").onclick = async () => {
    try {
      const body = run.conf && Object.keys(run.conf).length ? { conf: run.conf } : undefined;
      const r = await api("POST", `/v1/dags/${encodeURIComponent(run.dag_id)}/runs`, body);
      location.hash = `#/runs/${r.id}`;
    } catch (e) { err.innerHTML = errorBox(e); }
  };
}

// overdue is the hint on a running TI whose heartbeat is overdue: by how
// much, and how long until agent-lost acts and what it will decide.
function overdue(ti, risk, name) {
  const r = risk.running.find((x) => x.ti_id === ti.id);
  if (!r) return "";
  return `<tr data-overdue="${esc(ti.task_id)}"><td></td><td colspan="3" class="error">⚠ heartbeat overdue by ${fmtDur(parseDur(r.overdue))}:
    agent ${esc(name(r.agent_id))} last heartbeated at ${fmtClock(r.last_heartbeat_at)}; agent_lost acts in
    <span data-time-left>${left(risk.now, r.time_left)}</span> (${esc(r.decision)}: ${esc(r.outcome)})</td></tr>`;
}

function tiTable(ctx, run, atts, name, risk, outs) {
  const rows = run.task_instances.map((ti) => {
    const mine = atts.filter((a) => a.task === ti.task_id);
    const tries = mine.map((a) => {
      const current = a.attempt === ti.attempt_id;
      const exit = current && ti.exit_code != null ? ti.exit_code : (/exit code (-?\d+)/.exec(a.message || "") || [])[1] ?? "–";
      return `<tr data-attempt="${esc(a.attempt)}"><td>${a.try ?? "–"}</td><td>${esc(name(a.agent))}</td><td>${fmtClock(a.claimed)}</td>
        <td>${fmtClock(a.started)}</td><td>${fmtClock(a.ended || (current ? ti.end_date : null))}</td><td>${esc(exit)}</td>
        <td>${esc(a.reason || (current ? ti.reason : "") || "")}${a.message ? `<div class="muted why">${esc(a.message)}</div>` : ""}</td>
        <td><a href="#/runs/${run.id}/logs/${encodeURIComponent(ti.task_id)}?try=${a.try ?? ""}">logs</a></td></tr>`;
    }).join("");
    const lost = ti.log_dropped ? ` <span class="badge s-failed" data-log-incomplete="${ti.log_dropped}" title="an agent dropped lines it could not deliver; gap markers in the log show where">log incomplete: ${ti.log_dropped} line${ti.log_dropped === 1 ? "" : "s"} lost</span>` : "";
    return `<tr data-task="${esc(ti.task_id)}"><td><strong>${esc(ti.task_id)}</strong></td><td>${badge(ti.state)}</td>
      <td colspan="2" class="muted">${esc(ti.reason || "")} ${esc(ti.message || "")}${lost}<div class="mark">${markButtons(ctx, run, ti)}</div></td></tr>${overdue(ti, risk, name)}${outputsRow(outs.get(ti.task_id))}
      ${tries ? `<tr><td></td><td colspan="3"><table><thead><tr><th>Try</th><th>Agent</th><th>Claimed</th><th>Started</th><th>Ended</th>
      <th>Exit</th><th>Reason</th><th></th></tr></thead><tbody>${tries}</tbody></table></td></tr>` : ""}`;
  }).join("");
  document.getElementById("tis").innerHTML = `<table>${rows}</table>`;
}

function timeline(events, name) {
  document.getElementById("timeline").innerHTML = `<table id="events"><thead><tr><th>Time</th><th>Event</th><th>Task</th><th>What happened</th></tr></thead><tbody>${
    events.map((e) => {
      const d = isDecision(e.kind);
      return `<tr class="${d ? "decision" : ""}" data-kind="${esc(e.kind)}" ${d ? 'data-decision="true"' : ""}>
        <td class="mono">${fmtClock(e.time)}</td><td>${d ? '<span class="badge s-failed" title="recovery decision">⚑ decision</span> ' : ""}${esc(e.kind)}</td>
        <td>${esc(e.task_id || "")}${e.try_number != null ? ` <span class="muted">try ${e.try_number}</span>` : ""}</td>
        <td class="why">${d ? esc(explain(e, events, name)) : esc(e.message)}</td></tr>`;
    }).join("")}</tbody></table>`;
}
