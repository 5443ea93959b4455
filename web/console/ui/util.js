// Formatting shared by the pages. States are never told by colour alone:
// each badge has a symbol and the state's name (docs/console.md).
const symbols = {
  success: "✓", failed: "✗", upstream_failed: "⤫", running: "▶", queued: "⋯", scheduled: "◷",
  up_for_retry: "↻", cancelled: "⊘", skipped: "»", none: "○", active: "●", inactive: "○",
  pending: "◷", delivered: "✓", dead: "✗",
};

// stateSymbol is a state's symbol alone, for the grid's cells and the
// charts' marks, where the state's name is in the cell's title.
export function stateSymbol(state) {
  return symbols[state] || "•";
}

// readOnly disables a button that would change something, for the
// viewer, saying why (the API refuses the viewer too, adr/0020).
export const readOnly = ` disabled title="the viewer role is read-only"`;

export function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export function badge(state) {
  const s = state || "none";
  return `<span class="badge s-${esc(s)}" data-state="${esc(s)}"><span aria-hidden="true">${symbols[s] || "•"}</span>${esc(s.replaceAll("_", " "))}</span>`;
}

export function fmtTime(t) {
  if (!t) return "–";
  const d = new Date(t);
  return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

export function fmtClock(t) {
  if (!t) return "–";
  return new Date(t).toLocaleTimeString(undefined, { hour12: false });
}

// fmtDur writes seconds as "1h 2m", "3m 4s" or "5.2s".
export function fmtDur(sec) {
  if (sec == null || Number.isNaN(sec)) return "–";
  if (sec < 0) sec = 0;
  if (sec < 10) return `${sec.toFixed(1)}s`;
  sec = Math.round(sec);
  if (sec < 60) return `${sec}s`;
  const m = Math.floor(sec / 60), s = sec % 60;
  if (m < 60) return `${m}m ${s}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

// parseDur reads a Go duration string ("1m30s", "250ms") as seconds.
export function parseDur(s) {
  if (typeof s === "number") return s / 1e9;
  let total = 0;
  const re = /([0-9.]+)(ns|us|µs|ms|s|m|h)/g;
  const unit = { ns: 1e-9, us: 1e-6, "µs": 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  let m;
  while ((m = re.exec(String(s || ""))) !== null) total += parseFloat(m[1]) * unit[m[2]];
  return total;
}

export function secondsBetween(a, b) {
  return (new Date(b).getTime() - new Date(a).getTime()) / 1000;
}

// taskSummary is a run's TI counts as badges with numbers.
export function taskSummary(counts) {
  if (!counts) return "";
  return Object.entries(counts).filter(([, n]) => n > 0)
    .map(([s, n]) => `<span class="pill s-${esc(s)}" title="${esc(s)}">${symbols[s] || "•"} ${esc(s.replaceAll("_", " "))} ${n}</span>`).join("");
}

export function errorBox(err) {
  return `<div class="error" role="alert">${esc(err.message || String(err))}</div>`;
}
