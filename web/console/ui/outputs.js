// A task instance's outputs on the run page (docs/task-environment.md,
// "Outputs"): what the try that succeeded wrote to $VIGIL_OUTPUT, read
// from GET /v1/runs/{run_id}/outputs, every page.
import { api } from "./api.js";
import { esc } from "./util.js";

// runOutputs returns the run's outputs by task id.
export async function runOutputs(runID) {
  const by = new Map();
  let after = null;
  for (;;) {
    const page = await api("GET", `/v1/runs/${runID}/outputs${after == null ? "" : `?after=${after}`}`);
    for (const o of page.outputs) by.set(o.task_id, o);
    if (page.next_cursor == null || page.next_cursor === after) return by;
    after = page.next_cursor;
  }
}

// outputsRow is the row under a task instance that lists its outputs, key
// and value, each value whole (line breaks kept); "" when it has none.
export function outputsRow(o) {
  if (!o || !Object.keys(o.outputs).length) return "";
  const rows = Object.keys(o.outputs).sort().map((k) =>
    `<tr data-output-key="${esc(k)}"><td class="mono">${esc(k)}</td><td><pre class="output-value">${esc(o.outputs[k])}</pre></td></tr>`).join("");
  return `<tr data-outputs="${esc(o.task_id)}"><td></td><td colspan="3"><table class="outputs"><thead><tr>
    <th>Output <span class="muted">(try ${o.try_number}, ${o.bytes} bytes)</span></th><th>Value</th></tr></thead><tbody>${rows}</tbody></table></td></tr>`;
}
