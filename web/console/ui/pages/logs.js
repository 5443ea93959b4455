// Logs of one TI attempt, following live. An agent's gap-marker line
// (after it could not reach the control plane) is shown as a banner with
// the outage length and the replayed and dropped counts; a marker that
// counts lost lines of this try (its dropped field) says how many, and a
// TI with lost lines says its log is incomplete. Lines come in seq order
// and the cursor is the last line's seq, so each is shown once.
import { api, getRun } from "../api.js";
import { badge, esc, fmtClock } from "../util.js";

const gapRe = /control plane unreachable for (\d+)s: replaying (\d+) buffered events and (\d+) log lines \((\d+) dropped\)/;

export function gapBanner(line) {
  if (line.stream !== "system") return null;
  const m = gapRe.exec(line.line);
  const lost = line.dropped ? ` <strong data-dropped="${line.dropped}">${line.dropped} line${line.dropped === 1 ? "" : "s"} of this try were lost here.</strong>` : "";
  if (!m) {
    return lost ? `<div class="gap" role="note" data-gap="true" data-seq="${line.seq}">⚠ ${esc(line.line)}${lost} <span class="muted">(${fmtClock(line.time)})</span></div>` : null;
  }
  return `<div class="gap" role="note" data-gap="true" data-seq="${line.seq}" data-outage-seconds="${m[1]}">⚠ Gap: the agent could not reach the control plane ` +
    `for ${m[1]} s. Replayed ${m[2]} buffered events and ${m[3]} log lines; ${m[4]} dropped.${lost} <span class="muted">(${fmtClock(line.time)})</span></div>`;
}

function lineHTML(l) {
  return gapBanner(l) || `<div class="logline ${esc(l.stream)}" data-seq="${l.seq}"><span class="ts">${fmtClock(l.time)}</span>${esc(l.line)}</div>`;
}

export async function logsPage(ctx, runID, task, q) {
  const run = await getRun(runID);
  const ti = run.task_instances.find((t) => t.task_id === task);
  const maxTry = Math.max(ti?.try_number || 1, 1);
  const tryN = parseInt(q.get("try") || "", 10) || maxTry;
  ctx.main.innerHTML = `<h1>Logs: run <a href="#/runs/${runID}">#${runID}</a> task ${esc(task)}</h1>
    <div class="filters"><label>Try <select id="try">${Array.from({ length: maxTry }, (_, i) => i + 1).map((n) =>
      `<option ${n === tryN ? "selected" : ""}>${n}</option>`).join("")}</select></label>
      <span id="ti-state">${badge(ti?.state)}</span> <span class="muted" id="follow">following</span></div>
    <div class="loglines mono" id="lines"></div>`;
  document.getElementById("try").onchange = (ev) => { location.hash = `#/runs/${runID}/logs/${encodeURIComponent(task)}?try=${ev.target.value}`; };
  let after = 0; // the seq of the last line shown: lines come in seq order
  let done = false;
  let busy = false;
  ctx.every(1000, async () => {
    if (done || busy) return; // one read at a time, so no page is applied twice
    busy = true;
    try {
      const page = await api("GET", `/v1/runs/${runID}/tasks/${encodeURIComponent(task)}/logs?try=${tryN}&after=${after}`);
      if (!ctx.live()) return;
      const box = document.getElementById("lines");
      const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 20;
      const fresh = page.lines.filter((l) => l.seq > after);
      box.insertAdjacentHTML("beforeend", fresh.map(lineHTML).join(""));
      if (fresh.length) after = fresh[fresh.length - 1].seq;
      if (atEnd) box.scrollTop = box.scrollHeight;
      document.getElementById("ti-state").innerHTML = badge(page.ti_state);
      if (page.terminal && page.lines.length === 0) {
        done = true;
        document.getElementById("follow").innerHTML = page.log_dropped
          ? `<span data-log-incomplete="${page.log_dropped}">the task has ended: log incomplete, ${page.log_dropped} line${page.log_dropped === 1 ? " was" : "s were"} lost (see the gap markers)</span>`
          : "the task has ended: all lines shown";
        if (!box.children.length) box.innerHTML = `<p class="muted">No lines for try ${tryN}.</p>`;
      }
    } finally {
      busy = false;
    }
  });
}
