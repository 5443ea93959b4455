// Logs of one TI attempt, following live. An agent's gap-marker line
// (after it could not reach the control plane) is shown as a banner with
// the outage length and the replayed and dropped counts.
import { api } from "../api.js";
import { badge, esc, fmtClock } from "../util.js";

const gapRe = /control plane unreachable for (\d+)s: replaying (\d+) buffered events and (\d+) log lines \((\d+) dropped\)/;

export function gapBanner(line) {
  const m = gapRe.exec(line.line);
  if (line.stream !== "system" || !m) return null;
  return `<div class="gap" role="note" data-gap="true" data-outage-seconds="${m[1]}">⚠ Gap: the agent could not reach the control plane ` +
    `for ${m[1]} s. Replayed ${m[2]} buffered events and ${m[3]} log lines; ${m[4]} dropped. <span class="muted">(${fmtClock(line.time)})</span></div>`;
}

function lineHTML(l) {
  return gapBanner(l) || `<div class="logline ${esc(l.stream)}" data-seq="${l.seq}"><span class="ts">${fmtClock(l.time)}</span>${esc(l.line)}</div>`;
}

export async function logsPage(ctx, runID, task, q) {
  const run = await api("GET", `/v1/runs/${runID}`);
  const ti = run.task_instances.find((t) => t.task_id === task);
  const maxTry = Math.max(ti?.try_number || 1, 1);
  const tryN = parseInt(q.get("try") || "", 10) || maxTry;
  ctx.main.innerHTML = `<h1>Logs: run <a href="#/runs/${runID}">#${runID}</a> task ${esc(task)}</h1>
    <div class="filters"><label>Try <select id="try">${Array.from({ length: maxTry }, (_, i) => i + 1).map((n) =>
      `<option ${n === tryN ? "selected" : ""}>${n}</option>`).join("")}</select></label>
      <span id="ti-state">${badge(ti?.state)}</span> <span class="muted" id="follow">following</span></div>
    <div class="loglines mono" id="lines"></div>`;
  document.getElementById("try").onchange = (ev) => { location.hash = `#/runs/${runID}/logs/${encodeURIComponent(task)}?try=${ev.target.value}`; };
  let after = 0;
  let done = false;
  ctx.every(1000, async () => {
    if (done) return;
    const page = await api("GET", `/v1/runs/${runID}/tasks/${encodeURIComponent(task)}/logs?try=${tryN}&after=${after}`);
    if (!ctx.live()) return;
    const box = document.getElementById("lines");
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 20;
    box.insertAdjacentHTML("beforeend", page.lines.map(lineHTML).join(""));
    if (page.lines.length) after = page.lines[page.lines.length - 1].id;
    if (atEnd) box.scrollTop = box.scrollHeight;
    document.getElementById("ti-state").innerHTML = badge(page.ti_state);
    if (page.terminal && page.lines.length === 0) {
      done = true;
      document.getElementById("follow").textContent = "the task has ended: all lines shown";
      if (!box.children.length) box.innerHTML = `<p class="muted">No lines for try ${tryN}.</p>`;
    }
  });
}
