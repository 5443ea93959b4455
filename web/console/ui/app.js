// The console's shell: sign-in, the hash router and each page's timers.
// Live data is short polling (adr/0020): every page re-reads its API
// every 2 s while shown, from whichever replica served the page.
import { api, APIError, setCSRF } from "./api.js";
import { esc, errorBox } from "./util.js";
import { runsPage } from "./pages/runs.js";
import { runPage } from "./pages/run.js";
import { logsPage } from "./pages/logs.js";
import { agentsPage } from "./pages/agents.js";
import { clusterPage } from "./pages/cluster.js";
import { atRiskPage } from "./pages/atrisk.js";
import { dagsPage, dagPage } from "./pages/dags.js";
import { poolsPage } from "./pages/pools.js";
import { auditPage } from "./pages/audit.js";
import { notificationsPage } from "./pages/notifications.js";

const main = document.getElementById("main");
// session is who is signed in: the identity's name, its role, and
// whether that role is read-only (viewer) or may change the control plane
// (admin).
export const session = { name: "", role: "", viewer: false, admin: false };
let timers = [];
let generation = 0;

// A page context: its element, the role, and every(ms, fn), a poll that
// stops when the page is left.
function context() {
  const gen = ++generation;
  return {
    main, session,
    live: () => gen === generation,
    every(ms, fn) {
      const tick = async () => {
        if (gen !== generation) return;
        try {
          await fn();
          unreachable(null);
        } catch (e) {
          if (e instanceof APIError && e.status === 401) return signIn();
          unreachable(e);
        }
      };
      tick();
      timers.push(setInterval(tick, ms));
    },
  };
}

// unreachable shows, above every page, why the last poll failed (the
// replica is down, the database unreachable), and hides it again once a
// poll succeeds; the page keeps its last data meanwhile.
function unreachable(err) {
  const el = document.getElementById("banner");
  if (!err) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  el.textContent = `⚠ The update at ${new Date().toLocaleTimeString(undefined, { hour12: false })} failed: ${
    err instanceof APIError ? err.message : "the control plane did not answer"}. Showing the last data; retrying.`;
}

const routes = [
  [/^\/runs\/(\d+)\/logs\/([^/]+)$/, (ctx, m, q) => logsPage(ctx, m[1], decodeURIComponent(m[2]), q), "runs"],
  [/^\/runs\/(\d+)$/, (ctx, m) => runPage(ctx, m[1]), "runs"],
  [/^\/runs$/, (ctx, m, q) => runsPage(ctx, q), "runs"],
  [/^\/dags\/([^/]+)$/, (ctx, m, q) => dagPage(ctx, decodeURIComponent(m[1]), q), "dags"],
  [/^\/dags$/, (ctx) => dagsPage(ctx), "dags"],
  [/^\/agents$/, (ctx) => agentsPage(ctx), "agents"],
  [/^\/at-risk$/, (ctx) => atRiskPage(ctx), "at-risk"],
  [/^\/cluster$/, (ctx) => clusterPage(ctx), "cluster"],
  [/^\/pools$/, (ctx) => poolsPage(ctx), "pools"],
  [/^\/audit$/, (ctx) => auditPage(ctx), "audit"],
  [/^\/notifications$/, (ctx, m, q) => notificationsPage(ctx, q), "notifications"],
];

function route() {
  timers.forEach(clearInterval);
  timers = [];
  const hash = location.hash.replace(/^#/, "") || "/runs";
  const [path, query] = hash.split("?");
  const q = new URLSearchParams(query || "");
  for (const [re, page, nav] of routes) {
    const m = path.match(re);
    if (m) {
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === nav));
      const ctx = context();
      Promise.resolve(page(ctx, m, q)).catch((e) => {
        if (e instanceof APIError && e.status === 401) return signIn();
        main.innerHTML = errorBox(e);
      });
      return;
    }
  }
  main.innerHTML = `<p>No page ${esc(path)}. <a href="#/runs">Runs</a></p>`;
}

function showWho() {
  const who = document.getElementById("who");
  who.innerHTML = `<span class="muted" id="leader-line"></span> <span data-role="${esc(session.role)}" data-identity="${esc(session.name)}">signed in as <strong>${esc(session.name)}</strong> (${esc(session.role)}${
    session.viewer ? ", read-only" : ""})</span> <button id="signout" type="button">Sign out</button>`;
  document.getElementById("signout").onclick = async () => {
    await api("DELETE", "/v1/session").catch(() => {});
    setCSRF("");
    signIn();
  };
  document.getElementById("nav").hidden = false;
  document.body.classList.toggle("viewer", session.viewer);
  document.querySelector('nav a[data-nav="audit"]').hidden = !session.admin; // the audit log is the admin's
  leaderLine();
}

// leaderLine shows, on every page, which replica leads and which one
// served this page: in Pro any replica serves the console.
let leaderTimer = 0;
function leaderLine() {
  clearInterval(leaderTimer);
  const tick = async () => {
    const el = document.getElementById("leader-line");
    try {
      const c = await api("GET", "/v1/cluster");
      if (el) el.innerHTML = `leader <strong data-header-leader="${esc(c.leader)}">${esc(c.leader || "none")}</strong> · epoch ${c.epoch} · served by ${esc(c.self)}`;
    } catch { if (el) el.textContent = ""; }
  };
  tick();
  leaderTimer = setInterval(tick, 5000);
}

function signIn() {
  clearInterval(leaderTimer);
  timers.forEach(clearInterval);
  timers = [];
  generation++;
  document.getElementById("nav").hidden = true;
  document.getElementById("who").innerHTML = "";
  main.innerHTML = `<form class="card signin" id="signin">
    <h1>Sign in to Vigil</h1>
    <p class="muted">Paste your token: the operator or viewer token, or your own from the users file.</p>
    <label>Token <input type="password" name="token" id="token" autocomplete="current-password" required autofocus></label>
    <p><button class="primary" type="submit">Sign in</button></p>
    <div id="signin-error"></div></form>`;
  document.getElementById("signin").onsubmit = async (ev) => {
    ev.preventDefault();
    const token = document.getElementById("token").value.trim();
    try {
      const s = await api("POST", "/v1/session", { token });
      adopt(s);
      if (!location.hash || location.hash === "#/login") location.hash = "#/runs";
      else route();
    } catch (e) {
      document.getElementById("signin-error").innerHTML = errorBox(e);
    }
  };
}

function adopt(s) {
  session.name = s.name;
  session.role = s.role;
  session.viewer = s.role === "viewer";
  session.admin = s.role === "admin";
  setCSRF(s.csrf_token);
  showWho();
}

async function start() {
  window.addEventListener("hashchange", () => { if (session.role) route(); });
  try {
    adopt(await api("GET", "/v1/session"));
    route();
  } catch (e) {
    if (e instanceof APIError && e.status === 401) return signIn();
    main.innerHTML = errorBox(e);
  }
}

start();
