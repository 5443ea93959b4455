// Clear and mark from a run's page (docs/rerun.md), each behind a
// confirmation panel: the clear panel shows what a dry run of the chosen
// selection would clear before anything is, and the mark panel names the
// task, the state and the run. The panel lives outside the sections the
// page re-renders on each poll, so it stays open while they refresh.
import { api } from "./api.js";
import { badge, esc, errorBox, readOnly } from "./util.js";
const busy = new Set(["queued", "running"]);

// runRefuses says why a run takes no clear or mark, or "" when it does
// (the API answers 409 for these too).
function runRefuses(run) {
  if (run.state === "queued") return "a queued run has nothing to clear or mark yet";
  if (run.state === "cancelled") return "a cancelled run cannot be cleared or marked";
  return "";
}

// clearButton is the run's "Clear…" action.
export function clearButton(ctx, run) {
  if (ctx.session.viewer) return `<button id="clear-run"${readOnly}>Clear…</button>`;
  const why = runRefuses(run);
  return `<button id="clear-run"${why ? ` disabled title="${esc(why)}"` : ""}>Clear…</button>`;
}

// markButtons are a TI's "Mark success" and "Mark failed" actions, each
// disabled when the TI is already in that state, or is queued or
// running (an agent holds it).
export function markButtons(ctx, run, ti) {
  return ["success", "failed"].map((to) => {
    let off = "";
    if (ctx.session.viewer) off = readOnly;
    else if (runRefuses(run)) off = ` disabled title="${esc(runRefuses(run))}"`;
    else if (busy.has(ti.state)) off = ` disabled title="an agent holds it (${esc(ti.state)})"`;
    else if (ti.state === to) off = ` disabled title="already ${to}"`;
    return `<button type="button" data-mark="${to}" data-task="${esc(ti.task_id)}"${off}>Mark ${to}</button>`;
  }).join(" ");
}

// wireRerun attaches the actions to the page once: the clear button
// (re-rendered each poll, so found by id at each click) and the mark
// buttons inside the TI table (by delegation on el). panel is the
// element the confirmation panels open in; current() returns the run as
// last read.
export function wireRerun(actionsEl, tisEl, panel, current) {
  actionsEl.addEventListener("click", (ev) => {
    if (ev.target.id === "clear-run" && !ev.target.disabled) openClear(panel, current());
  });
  tisEl.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-mark]");
    if (b && !b.disabled) openMark(panel, current(), b.dataset.task, b.dataset.mark);
  });
}

function closer(panel) {
  return () => { panel.innerHTML = ""; };
}

// openClear shows the clear panel for run: the tasks to pick (none picked:
// the default selection), the options, a reason, and the dry run's list.
function openClear(panel, run) {
  panel.innerHTML = `<div class="card confirm" id="clear-panel" role="dialog" aria-label="Clear task instances of run #${run.id}">
    <h2>Clear task instances of run #${run.id}</h2>
    <p class="muted">A cleared task instance returns to none and runs again as a new try (its try number keeps counting);
    the run returns to running. Queued and running task instances cannot be cleared.</p>
    <fieldset id="clear-tasks"><legend>Tasks: none ticked clears every task instance that ended failed, upstream failed or skipped</legend>
    ${run.task_instances.map((ti) => `<label class="check"><input type="checkbox" value="${esc(ti.task_id)}"> ${esc(ti.task_id)} ${badge(ti.state)}</label>`).join("")}
    </fieldset>
    <div class="actions"><label class="check"><input type="checkbox" id="clear-downstream"> and their downstream tasks</label>
    <label class="check"><input type="checkbox" id="clear-upstream"> and their upstream tasks</label>
    <label class="check"><input type="checkbox" id="clear-only-failed"> only those that failed</label></div>
    <label>Reason (recorded in each task instance's event) <input id="clear-reason" maxlength="1024" placeholder="optional"></label>
    <div id="clear-preview" aria-live="polite"></div>
    <div class="actions"><button class="danger" id="clear-confirm" disabled>Clear</button> <button id="clear-cancel" type="button">Cancel</button></div>
    <div id="clear-error"></div></div>`;
  const el = (id) => document.getElementById(id);
  const request = (dryRun) => {
    const tasks = [...panel.querySelectorAll("#clear-tasks input:checked")].map((i) => i.value);
    const body = { downstream: el("clear-downstream").checked, upstream: el("clear-upstream").checked,
      only_failed: el("clear-only-failed").checked, dry_run: dryRun };
    if (tasks.length) body.task_ids = tasks;
    const reason = el("clear-reason").value.trim();
    if (reason) body.reason = reason;
    return api("POST", `/v1/runs/${run.id}/clear`, body);
  };
  let seq = 0;
  const preview = async () => {
    const mine = ++seq;
    const confirm = el("clear-confirm");
    confirm.disabled = true;
    try {
      const r = await request(true);
      if (mine !== seq || !el("clear-preview")) return;
      el("clear-error").innerHTML = "";
      el("clear-preview").innerHTML = r.cleared.length ? `<p>This will clear ${r.cleared.length} task instance${r.cleared.length === 1 ? "" : "s"}:</p>
        <table><thead><tr><th>Task</th><th>Now</th><th>Next try</th></tr></thead><tbody>${r.cleared.map((c) =>
          `<tr data-clear-task="${esc(c.task_id)}"><td>${esc(c.task_id)}</td><td>${badge(c.state)}${c.rederived ? ' <span class="muted">(its upstream is cleared)</span>' : ""}</td>
          <td>${c.try_number + 1}</td></tr>`).join("")}</tbody></table>`
        : `<p class="muted" data-clear-none="true">Nothing to clear with this selection.</p>`;
      confirm.textContent = `Clear ${r.cleared.length} task instance${r.cleared.length === 1 ? "" : "s"}`;
      confirm.disabled = r.cleared.length === 0;
    } catch (e) {
      if (mine !== seq || !el("clear-preview")) return;
      el("clear-preview").innerHTML = "";
      el("clear-error").innerHTML = errorBox(e);
    }
  };
  panel.querySelector("#clear-panel").addEventListener("change", preview);
  el("clear-cancel").onclick = closer(panel);
  el("clear-confirm").onclick = async () => {
    el("clear-confirm").disabled = true;
    try {
      const r = await request(false);
      panel.innerHTML = `<p class="card done" data-cleared="${r.cleared.length}">Cleared ${r.cleared.length} task instance${r.cleared.length === 1 ? "" : "s"}
        of run #${run.id}: ${r.cleared.map((c) => esc(c.task_id)).join(", ")}; the run is ${esc(r.run.state)}.</p>`;
    } catch (e) {
      el("clear-error").innerHTML = errorBox(e);
    }
  };
  preview();
}

// openMark shows the mark panel: the task, the state it gets, whether its
// downstream tasks get it too, and a reason.
function openMark(panel, run, task, to) {
  panel.innerHTML = `<div class="card confirm" id="mark-panel" role="dialog" aria-label="Mark ${esc(task)} ${to}">
    <h2>Mark ${esc(task)} of run #${run.id} ${to}</h2>
    <p class="muted">It ends ${to} with reason <code>marked</code> and your name in its event; its dependents then go on as if it had
    ${to === "success" ? "succeeded (those it alone held upstream_failed run)" : "failed"}.</p>
    <label class="check"><input type="checkbox" id="mark-downstream"> and every task downstream of it</label>
    <label>Reason (recorded in the event) <input id="mark-reason" maxlength="1024" placeholder="optional"></label>
    <div class="actions"><button class="${to === "failed" ? "danger" : "primary"}" id="mark-confirm" data-mark-to="${to}">Mark ${to}</button>
    <button id="mark-cancel" type="button">Cancel</button></div><div id="mark-error"></div></div>`;
  const el = (id) => document.getElementById(id);
  el("mark-cancel").onclick = closer(panel);
  el("mark-confirm").onclick = async () => {
    el("mark-confirm").disabled = true;
    const body = { state: to, downstream: el("mark-downstream").checked };
    const reason = el("mark-reason").value.trim();
    if (reason) body.reason = reason;
    try {
      const r = await api("POST", `/v1/runs/${run.id}/tasks/${encodeURIComponent(task)}/mark`, body);
      panel.innerHTML = `<p class="card done" data-marked="${r.marked.length}">Marked ${r.marked.map((m) => esc(m.task_id)).join(", ")} ${to}${
        r.reopened.length ? `; ${r.reopened.map(esc).join(", ")} will run` : ""}; the run is ${esc(r.run.state)}.</p>`;
    } catch (e) {
      el("mark-confirm").disabled = false;
      el("mark-error").innerHTML = errorBox(e);
    }
  };
}
