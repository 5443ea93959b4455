// Cluster: the leader and its epoch, every replica seen, the thresholds
// (operators edit them; the API's validation errors appear inline), each
// reaper's last sweep, the decision counters and the grace state.
import { api, serverNow } from "../api.js";
import { esc, errorBox, fmtClock, fmtDur, parseDur } from "../util.js";

const fields = ["agent_lost", "dispatch_lost", "orphan"];

export async function clusterPage(ctx) {
  ctx.main.innerHTML = `<h1>Cluster</h1><div id="leader" class="card"></div>
    <div class="grid2"><div><h2>Replicas</h2><div class="card" id="replicas"></div>
      <h2>Thresholds</h2><form class="card" id="thresholds"></form></div>
    <div><h2>Reapers (on the leader)</h2><div class="card" id="reapers"></div>
      <h2>Decisions</h2><div class="card" id="decisions"></div></div></div>`;
  let formShown = false;
  ctx.every(2000, async () => {
    const c = await api("GET", "/v1/cluster");
    if (!ctx.live()) return;
    const lead = c.replicas.find((r) => r.leading && r.replica_id === c.leader) || c.replicas.find((r) => r.leading);
    let grace = "unknown (no leader has reported)";
    if (lead?.grace_ends) {
      const left = (new Date(lead.grace_ends).getTime() - serverNow()) / 1000;
      grace = left > 0 ? `in post-leadership grace: heartbeat-based reaping resumes in ${fmtDur(left)} (at ${fmtClock(lead.grace_ends)})`
        : `over since ${fmtClock(lead.grace_ends)}: reapers act on stale heartbeats`;
    }
    document.getElementById("leader").innerHTML = `<dl class="kv">
      <dt>Leader</dt><dd data-leader="${esc(c.leader)}"><strong>${esc(c.leader || "none")}</strong></dd>
      <dt>Epoch</dt><dd data-epoch="${c.epoch}">${c.epoch}</dd>
      <dt>Served by</dt><dd>${esc(c.self)}${c.self === c.leader ? " (the leader)" : " (a follower)"}</dd>
      <dt>Grace</dt><dd data-grace>${esc(grace)}</dd>
      <dt>Mass-silence brake</dt><dd>${lead?.brake_engaged ? `⚠ engaged: ${esc(lead.brake_message)}` : "○ released"}</dd>
      <dt>Heartbeat interval</dt><dd>${esc(c.heartbeat_interval)}</dd></dl>`;
    document.getElementById("replicas").innerHTML = `<table><thead><tr><th>Replica</th><th>Role</th><th>Epoch</th><th>Version</th><th>Seen</th></tr></thead><tbody>${
      c.replicas.map((r) => `<tr data-replica="${esc(r.replica_id)}"><td>${esc(r.replica_id)}</td>
        <td>${r.leading ? '<span class="badge s-success">★ leader</span>' : '<span class="badge s-none">○ follower</span>'}</td>
        <td>${r.epoch}</td><td>${esc(r.version)}</td><td>${fmtDur(parseDur(r.seen_ago))} ago</td></tr>`).join("")}</tbody></table>`;
    document.getElementById("reapers").innerHTML = !lead || !lead.reapers.length ? `<p class="muted">No sweep reported yet.</p>` :
      `<table><thead><tr><th>Reaper</th><th>Last sweep</th><th>Took</th><th>Candidates</th><th>Applied</th><th>Errors</th></tr></thead><tbody>${
        lead.reapers.map((s) => `<tr data-reaper="${esc(s.reaper)}"><td>${esc(s.reaper)}</td><td>${fmtClock(s.at)}</td><td>${esc(s.duration)}</td>
          <td>${s.candidates}</td><td>${s.applied}</td><td>${s.errors}</td></tr>`).join("")}</tbody></table>`;
    const counts = Object.entries(lead?.decisions || {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    document.getElementById("decisions").innerHTML = `<p class="muted">Counted by the leader since it started.</p><table><tbody>${
      counts.map(([k, n]) => `<tr data-decision-count="${esc(k)}"><td>${esc(k)}</td><td>${n}</td></tr>`).join("")}</tbody></table>`;
    if (!formShown) {
      formShown = true;
      thresholdsForm(ctx, c.thresholds);
    }
  });
}

function thresholdsForm(ctx, th) {
  const form = document.getElementById("thresholds");
  const ro = ctx.session.admin ? "" : " disabled"; // thresholds need the admin role
  form.innerHTML = fields.map((f) => `<label>${f.replace("_", "-")}
      <input name="${f}" id="th-${f}" value="${esc(th[f])}"${ro}><span class="error" id="th-${f}-error"></span></label>`).join("") +
    `<div class="actions"><button class="primary" type="submit"${ro}>Save</button>
     <button type="button" id="th-reset"${ro}>Reset to configured</button>${ctx.session.admin ? "" : '<span class="muted">needs the admin role</span>'}</div>
     <div id="th-error"></div>`;
  const show = (t) => fields.forEach((f) => { document.getElementById(`th-${f}`).value = t[f]; });
  const clear = () => fields.forEach((f) => {
    document.getElementById(`th-${f}`).classList.remove("field-error");
    document.getElementById(`th-${f}-error`).textContent = "";
  });
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    clear();
    document.getElementById("th-error").innerHTML = "";
    const body = {};
    for (const f of fields) body[f] = document.getElementById(`th-${f}`).value.trim();
    try {
      show(await api("PUT", "/v1/thresholds", body));
      document.getElementById("th-error").innerHTML = `<span class="muted">saved</span>`;
    } catch (e) {
      // The API names each field and rule: put each message by its field.
      let placed = false;
      for (const f of fields) {
        const m = new RegExp(`(?:^|[;:,\\s"])${f}"?:? ([^;]*)`).exec(e.message);
        if (m) {
          document.getElementById(`th-${f}`).classList.add("field-error");
          document.getElementById(`th-${f}-error`).textContent = `${f}: ${m[1]}`;
          placed = true;
        }
      }
      if (!placed) document.getElementById("th-error").innerHTML = errorBox(e);
    }
  };
  document.getElementById("th-reset").onclick = async () => {
    clear();
    try { show(await api("DELETE", "/v1/thresholds")); } catch (e) { document.getElementById("th-error").innerHTML = errorBox(e); }
  };
}
