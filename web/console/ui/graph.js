// The run graph: tasks laid out by @dagrejs/dagre (copied in by make web),
// drawn as SVG, each node coloured by its TI state and labelled with the
// state's symbol and name. Without the library, a plain list.
import { esc } from "./util.js";

let dagreMod;
async function dagre() {
  if (dagreMod === undefined) {
    dagreMod = await import("./vendor/dagre.esm.js").then((m) => m.default || m, () => null);
  }
  return dagreMod;
}

const symbols = { success: "✓", failed: "✗", upstream_failed: "⤫", running: "▶", queued: "⋯", scheduled: "◷",
  up_for_retry: "↻", cancelled: "⊘", skipped: "»", none: "○" };

// renderGraph draws tasks (id → state) with edges from deps (id → [ids]).
export async function renderGraph(el, runID, tasks, deps) {
  const lib = await dagre();
  if (!lib) {
    el.innerHTML = `<p class="muted" data-graph="missing">The console was built without its graph library (run <code>make web</code>); tasks:</p>
      <ul>${Object.entries(tasks).map(([id, st]) => `<li data-task="${esc(id)}" data-state="${esc(st)}">${esc(id)}: ${esc(st)}</li>`).join("")}</ul>`;
    return;
  }
  const g = new lib.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 46, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const [id, st] of Object.entries(tasks)) {
    const label = `${symbols[st] || "•"} ${id}`;
    g.setNode(id, { label, state: st, width: Math.max(90, 8 * Math.max(label.length, st.length + 2) + 20), height: 44 });
  }
  for (const [id, ups] of Object.entries(deps)) {
    for (const up of ups || []) if (g.hasNode(up) && g.hasNode(id)) g.setEdge(up, id);
  }
  lib.layout(g);
  const { width, height } = g.graph();
  const edges = g.edges().map((e) => {
    const pts = g.edge(e).points;
    return `<path class="edge" marker-end="url(#arrow-${runID})" d="M${pts.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" L")}"/>`;
  }).join("");
  const nodes = g.nodes().map((id) => {
    const n = g.node(id);
    const x = n.x - n.width / 2, y = n.y - n.height / 2;
    return `<g class="node n-${esc(n.state)}" data-task="${esc(id)}" data-state="${esc(n.state)}">
      <a href="#/runs/${runID}/logs/${encodeURIComponent(id)}"><title>${esc(id)}: ${esc(n.state)}</title>
      <rect x="${x}" y="${y}" width="${n.width}" height="${n.height}" rx="6"/>
      <text x="${n.x}" y="${n.y - 3}" text-anchor="middle">${esc(n.label)}</text>
      <text x="${n.x}" y="${n.y + 13}" text-anchor="middle" class="muted">${esc(n.state.replaceAll("_", " "))}</text></a></g>`;
  }).join("");
  el.innerHTML = `<svg role="img" aria-label="task graph of run ${runID}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">
    <defs><marker id="arrow-${runID}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
    <path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>${edges}${nodes}</svg>`;
}
