// Pools (docs/pools.md): each pool's slots, the TIs that hold one and
// those queued for one, re-read every 2 s; an operator creates or resizes
// a pool and deletes one, each after a confirmation panel that says what
// will happen.
import { api } from "../api.js";
import { esc, errorBox, fmtTime } from "../util.js";

const notAdmin = ` disabled title="setting and deleting pools needs the admin role"`;

export async function poolsPage(ctx) {
  const ro = ctx.session.admin ? "" : notAdmin;
  ctx.main.innerHTML = `<h1>Pools</h1>
    <p class="muted">A pool caps the task instances that run at once across every DAG, run and agent that names it
    (a task's <code>pool</code> field). Running may exceed the slots only after a pool was shrunk, until its task instances drain.</p>
    <div class="card"><table id="pools"><thead><tr><th>Pool</th><th>Slots</th><th>Running</th><th>Queued</th><th>Description</th>
    <th>Updated</th><th></th></tr></thead><tbody></tbody></table></div>
    <form class="card" id="pool-form"><h2>Create or resize a pool</h2>
    <div class="filters"><label>Name <input name="name" id="pool-name" required maxlength="100"></label>
    <label>Slots <input name="slots" id="pool-slots" type="number" min="0" max="1000000" required></label>
    <label>Description <input name="description" id="pool-description" maxlength="1000" placeholder="unchanged when empty"></label>
    <button class="primary" type="submit" id="pool-set"${ro}>Set…</button></div></form>
    <div id="pool-panel"></div>`;
  let pools = [];
  const panel = document.getElementById("pool-panel");
  const byName = (n) => pools.find((p) => p.name === n);
  document.getElementById("pool-form").onsubmit = (ev) => {
    ev.preventDefault();
    const name = document.getElementById("pool-name").value.trim();
    const slots = Number(document.getElementById("pool-slots").value);
    const description = document.getElementById("pool-description").value.trim();
    confirmSet(panel, byName(name), name, slots, description);
  };
  document.getElementById("pools").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-pool-action]");
    if (!b || b.disabled) return;
    const p = byName(b.dataset.pool);
    if (!p) return;
    if (b.dataset.poolAction === "edit") {
      document.getElementById("pool-name").value = p.name;
      document.getElementById("pool-slots").value = p.slots;
      document.getElementById("pool-slots").focus();
    } else {
      confirmDelete(panel, p);
    }
  });
  ctx.every(2000, async () => {
    const list = await api("GET", "/v1/pools");
    if (!ctx.live()) return;
    pools = list.pools;
    document.querySelector("#pools tbody").innerHTML = pools.length ? pools.map((p) => `<tr data-pool="${esc(p.name)}">
      <td><strong>${esc(p.name)}</strong></td><td data-slots="${p.slots}">${p.slots}</td>
      <td data-running="${p.running}">${p.running}${p.running > p.slots ? ' <span class="badge s-queued" title="shrunk below its running task instances: admits none until they drain">over</span>' : ""}</td>
      <td data-queued="${p.queued}">${p.queued}${p.queued_capped ? "+" : ""}</td><td>${esc(p.description)}</td><td>${fmtTime(p.updated_at)}</td>
      <td><button type="button" data-pool-action="edit" data-pool="${esc(p.name)}"${ro}>Resize</button>
      <button type="button" class="danger" data-pool-action="delete" data-pool="${esc(p.name)}"${ro}>Delete…</button></td></tr>`).join("")
      : `<tr><td colspan="7" class="muted">No pools. Tasks that name none are limited only by their DAG's and agents' limits.</td></tr>`;
  });
}

// confirmSet asks before PUT /v1/pools/{name}: a new pool, or a resize
// from its slots now, saying when the new size admits nothing new.
function confirmSet(panel, old, name, slots, description) {
  let what = `Create pool <strong>${esc(name)}</strong> with ${slots} slot${slots === 1 ? "" : "s"}`;
  if (old) {
    what = `Resize pool <strong>${esc(name)}</strong> from ${old.slots} to ${slots} slot${slots === 1 ? "" : "s"}`;
    if (slots < old.running) what += `: ${old.running} of its task instances run now, so it admits none until fewer than ${slots} do`;
  }
  if (slots === 0) what += "; with 0 slots none of its queued task instances will start";
  panel.innerHTML = `<div class="card confirm" id="pool-confirm-panel" role="dialog" aria-label="Set pool ${esc(name)}">
    <p id="pool-confirm-what">${what}?</p>
    <div class="actions"><button class="primary" id="pool-confirm">Set ${esc(name)} to ${slots}</button>
    <button type="button" id="pool-cancel">Cancel</button></div><div id="pool-error"></div></div>`;
  document.getElementById("pool-cancel").onclick = () => { panel.innerHTML = ""; };
  document.getElementById("pool-confirm").onclick = async () => {
    const body = { slots };
    if (description) body.description = description;
    try {
      const r = await api("PUT", `/v1/pools/${encodeURIComponent(name)}`, body);
      panel.innerHTML = `<p class="card done" data-pool-set="${esc(r.name)}">${r.created ? "Created" : "Set"} pool ${esc(r.name)}: ${r.slots} slot${r.slots === 1 ? "" : "s"}.</p>`;
    } catch (e) {
      document.getElementById("pool-error").innerHTML = errorBox(e);
    }
  };
}

// confirmDelete asks before DELETE /v1/pools/{name}; the API refuses (409)
// while a DAG names the pool or a task instance of it has not ended.
function confirmDelete(panel, p) {
  panel.innerHTML = `<div class="card confirm" id="pool-confirm-panel" role="dialog" aria-label="Delete pool ${esc(p.name)}">
    <p id="pool-confirm-what">Delete pool <strong>${esc(p.name)}</strong>? It is refused while a DAG names it or one of its
    task instances has not ended.</p>
    <div class="actions"><button class="danger" id="pool-confirm">Delete ${esc(p.name)}</button>
    <button type="button" id="pool-cancel">Cancel</button></div><div id="pool-error"></div></div>`;
  document.getElementById("pool-cancel").onclick = () => { panel.innerHTML = ""; };
  document.getElementById("pool-confirm").onclick = async () => {
    try {
      await api("DELETE", `/v1/pools/${encodeURIComponent(p.name)}`);
      panel.innerHTML = `<p class="card done" data-pool-deleted="${esc(p.name)}">Deleted pool ${esc(p.name)}.</p>`;
    } catch (e) {
      document.getElementById("pool-error").innerHTML = errorBox(e);
    }
  };
}
