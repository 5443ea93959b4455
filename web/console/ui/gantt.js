// The run's Gantt chart: one bar per try of each TI on one time axis,
// from its claim (hatched, waiting for the process to start) through its
// start to its end, drawn as SVG. A try a reaper ended is marked ⚑ with
// the decision; a retry is labelled ↻. Bars come from the attempts the
// run page already reads from the timeline (pages/run.js attempts()).
import { esc, fmtClock, fmtDur, stateSymbol } from "./util.js";
import { isDecision } from "./decisions.js";

const outcomes = {
  ti_success: "success", ti_failed: "failed", ti_up_for_retry: "up_for_retry", ti_cancelled: "cancelled",
  ti_skipped: "skipped", ti_upstream_failed: "upstream_failed",
};
const symbol = (out) => (out === "reaped" ? "⚑" : out === "open" ? "…" : stateSymbol(out));

// outcome names how an attempt ended: its state, "reaped" when a
// recovery decision ended it, "running" while the TI runs it, or "open"
// when the timeline does not say (yet).
export function outcome(a, ti) {
  if (a.reason && isDecision(a.reason)) return "reaped";
  if (a.reason && outcomes[a.reason]) return outcomes[a.reason];
  if (ti && ti.attempt_id === a.attempt && ti.state === "running") return "running";
  return "open";
}

// offset writes a tick's distance from the first claim: milliseconds
// below a second, where fmtDur's tenths would repeat.
const offset = (ms) => (ms < 1000 ? `${Math.round(ms)}ms` : fmtDur(ms / 1000));

const labelW = 190, chartW = 760, rowH = 26, top = 28;

// renderGantt draws the attempts of run (pages/run.js attempts()) in
// el, on the server's clock now for the tries still running.
export function renderGantt(el, run, atts, now) {
  const order = new Map(run.task_instances.map((t, i) => [t.task_id, i]));
  const tis = new Map(run.task_instances.map((t) => [t.task_id, t]));
  const bars = atts.filter((a) => a.claimed || a.started)
    .map((a) => ({ ...a, from: new Date(a.claimed || a.started).getTime(), out: outcome(a, tis.get(a.task)) }))
    .sort((x, y) => (order.get(x.task) ?? 1e9) - (order.get(y.task) ?? 1e9) || (x.try ?? 0) - (y.try ?? 0) || x.from - y.from);
  if (!bars.length) {
    el.innerHTML = `<p class="muted" data-gantt="empty">No task of this run has been claimed yet.</p>`;
    return;
  }
  for (const b of bars) {
    b.start = b.started ? new Date(b.started).getTime() : null;
    b.to = b.ended ? new Date(b.ended).getTime() : (b.out === "running" ? now : b.start ?? b.from);
  }
  const t0 = Math.min(...bars.map((b) => b.from));
  const t1 = Math.max(t0 + 100, ...bars.map((b) => b.to));
  const x = (t) => labelW + ((t - t0) / (t1 - t0)) * chartW;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const t = t0 + f * (t1 - t0), px = x(t).toFixed(1);
    return `<line class="tick" x1="${px}" x2="${px}" y1="${top - 6}" y2="${top + bars.length * rowH}"/>
      <text class="axis" x="${px}" y="${top - 10}" text-anchor="${f === 0 ? "start" : f === 1 ? "end" : "middle"}">${
        esc(f === 0 ? fmtClock(t) : `+${offset(t - t0)}`)}</text>`;
  }).join("");
  const rows = bars.map((b, i) => {
    const y = top + i * rowH + 4, h = rowH - 8;
    const wait = b.start != null ? `<rect class="wait" x="${x(b.from).toFixed(1)}" y="${y}" width="${Math.max(1, x(b.start) - x(b.from)).toFixed(1)}" height="${h}"/>` : "";
    const runFrom = b.start ?? b.from;
    const body = b.start != null || b.ended ? `<rect class="run" x="${x(runFrom).toFixed(1)}" y="${y}" width="${Math.max(2, x(b.to) - x(runFrom)).toFixed(1)}" height="${h}"/>` : "";
    const mark = b.out === "reaped" ? `<text class="mark" x="${(x(b.to) + 4).toFixed(1)}" y="${y + h - 4}">⚑ ${esc(b.reason)}</text>` : "";
    const label = `${b.task} · try ${b.try ?? "?"}${(b.try ?? 1) > 1 ? " ↻" : ""}`;
    const what = `${b.task}, try ${b.try ?? "?"}: ${b.out === "reaped" ? b.reason : b.out.replaceAll("_", " ")}; claimed ${fmtClock(b.from)}` +
      `${b.start != null ? `, started ${fmtClock(b.start)}` : ""}${b.ended ? `, ended ${fmtClock(b.ended)}` : ""}` +
      `${b.start != null ? ` (ran ${fmtDur((b.to - b.start) / 1000)})` : ""}`;
    return `<g class="gantt-bar o-${esc(b.out)}" data-task="${esc(b.task)}" data-try="${b.try ?? ""}" data-outcome="${esc(b.out)}"${
      b.out === "reaped" ? ` data-reaped="${esc(b.reason)}"` : ""}${(b.try ?? 1) > 1 ? ' data-retry="true"' : ""}>
      <title>${esc(what)}</title>
      <a href="#/runs/${run.id}/logs/${encodeURIComponent(b.task)}?try=${b.try ?? ""}">
      <text class="label" x="${labelW - 8}" y="${y + h - 5}" text-anchor="end">${symbol(b.out)} ${esc(label)}</text>
      ${wait}${body}${mark}</a></g>`;
  }).join("");
  const height = top + bars.length * rowH + 6;
  el.innerHTML = `<svg role="img" aria-label="Gantt chart of run ${run.id}: ${bars.length} tries" viewBox="0 0 ${labelW + chartW + 120} ${height}"
    width="${labelW + chartW + 120}" height="${height}" data-gantt-bars="${bars.length}">${ticks}${rows}</svg>
    <p class="muted legend">Each bar is one try: <span class="key wait"></span> claimed, waiting for its process to start;
    <span class="key run"></span> running until it ended (colour and symbol by outcome); ⚑ a recovery decision ended it; ↻ a retry.
    Span ${esc(fmtDur((t1 - t0) / 1000))}.</p>`;
}
