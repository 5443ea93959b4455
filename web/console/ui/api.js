// The console's only way to the server: same-origin fetch with the session
// cookie, the session's CSRF token on every state-changing request, and
// the server clock's offset, so ages are measured on the database clock.
let csrf = "";
let skewMs = 0; // server clock minus this browser's, from the Date header

export function setCSRF(token) { csrf = token || ""; }

// serverNow is the server's clock as best this page knows it.
export function serverNow() { return Date.now() + skewMs; }

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET" && method !== "HEAD" && csrf) opts.headers["X-Vigil-CSRF"] = csrf;
  const resp = await fetch(path, opts);
  const date = Date.parse(resp.headers.get("Date") || "");
  if (!Number.isNaN(date)) skewMs = date - Date.now();
  if (resp.status === 204) return null;
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const e = data.error || {};
    throw new APIError(resp.status, e.code || "", e.message || resp.statusText);
  }
  return data;
}

// getRun reads a run with every one of its task instances, in the DAG's
// order: GET /v1/runs/{id} serves them a page at a time in task id order
// (task id cursor), each with its ordinal.
export async function getRun(runID) {
  const run = await api("GET", `/v1/runs/${runID}?limit=1000`);
  for (let i = 0; i < 100 && run.next_cursor != null; i++) {
    const page = await api("GET", `/v1/runs/${runID}?after=${encodeURIComponent(run.next_cursor)}&limit=1000`);
    run.task_instances.push(...page.task_instances);
    run.next_cursor = page.next_cursor;
  }
  run.task_instances.sort((a, b) => a.ordinal - b.ordinal);
  return run;
}

// allEvents reads every page of a run's timeline.
export async function allEvents(runID) {
  const out = [];
  let after = 0;
  for (let i = 0; i < 20; i++) {
    const page = await api("GET", `/v1/runs/${runID}/events?after=${after}&limit=5000`);
    out.push(...page.events);
    if (page.next_cursor == null) break;
    after = page.next_cursor;
  }
  return out;
}
