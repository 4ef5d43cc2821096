// toolgate console (docs/console.md): plain ES module, no dependencies, no network beyond this gateway.
// Everything shown is built with DOM nodes and text, never innerHTML: results are untrusted data.

const KEY_STORAGE = "toolgate.apiKey";
/** The console lives at <base>/console/, the API at <base>/v1/: relative, so a path prefix is kept. */
const API_BASE = new URL("../v1/", location.href);
const SAMPLE_RECEIPT_ID = "console-sample";

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const fmt = (n) => Number(n).toLocaleString("en-US");
const time = (at) =>
  at === null || at === undefined
    ? "—"
    : new Date(at)
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d+Z$/, "Z");

/** Budget-engine and estimator facts served by the gateway (settings.json), so the page follows the same rules. */
let settings = { status_keys: [], status_key_suffix: "_id", min_calibration_reports: 3 };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.dataset[name.slice(5).replace(/-(\w)/g, (_, c) => c.toUpperCase())] = String(value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  node.append(
    ...children
      .flat()
      .filter((c) => c !== null && c !== undefined && c !== false)
      .map((c) => (c instanceof Node ? c : String(c))),
  );
  return node;
}
const badge = (text, kind = String(text)) => el("span", { class: `badge ${kind}` }, text);
const code = (text) => el("code", {}, text);

// ---- API

/** A failed call, carrying the gateway's error body `{error: {code, message, details?}}` (status 0: not sent). */
class ApiFailure extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** An input the console could not even send, in the gateway's own error shape. */
function inputError(path, message) {
  return new ApiFailure(0, {
    error: { code: "invalid_json", message: `${path} is not valid JSON: fix it and try again`, details: [{ path, code: "invalid_json", message }] },
  });
}

async function api(method, path, body) {
  const headers = { authorization: `Bearer ${sessionStorage.getItem(KEY_STORAGE) ?? ""}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  let res;
  try {
    res = await fetch(new URL(path, API_BASE), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiFailure(0, { error: { code: "network_error", message: `the gateway did not answer: ${err.message}` } });
  }
  const text = await res.text();
  let data;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: { code: "invalid_response", message: text.slice(0, 300) } };
  }
  if (!res.ok) throw new ApiFailure(res.status, data);
  return data;
}

/** Renders a failure readably: code, status, message, and each detail's path, code, message and allowed values. */
function showError(slot, err) {
  slot.replaceChildren();
  if (!err) return;
  const e =
    err instanceof ApiFailure ? (err.body?.error ?? { code: "error", message: err.message }) : { code: "console_error", message: String(err?.message ?? err) };
  const box = el(
    "div",
    { class: "error", role: "alert" },
    el("div", { class: "head" }, el("span", { class: "code" }, e.code ?? "error"), err?.status ? el("span", { class: "status" }, `HTTP ${err.status}`) : null),
    el("div", { class: "message" }, e.message ?? ""),
  );
  if (Array.isArray(e.details) && e.details.length > 0) {
    box.append(
      el(
        "table",
        { class: "table details" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            ["path", "code", "message", "allowed"].map((h) => el("th", {}, h)),
          ),
        ),
        el(
          "tbody",
          {},
          e.details.map((d) =>
            el(
              "tr",
              {},
              el("td", {}, code(d.path || "(body)")),
              el("td", {}, code(d.code ?? "")),
              el("td", {}, d.message ?? ""),
              el("td", {}, d.allowed ? code(d.allowed) : ""),
            ),
          ),
        ),
      ),
    );
  }
  slot.append(box);
}

/** Runs `work` with `button` disabled; shows any failure in `slot`. */
async function busy(button, slot, work) {
  button.disabled = true;
  showError(slot, null);
  try {
    await work();
  } catch (err) {
    showError(slot, err);
  } finally {
    button.disabled = false;
  }
}

// ---- sign-in and tabs

function showSignedIn(signedIn) {
  $("signin").hidden = signedIn;
  $("tabs").hidden = !signedIn;
  $("session").hidden = !signedIn;
  if (signedIn) route();
  else for (const id of ["dryrun", "runs"]) $(id).hidden = true;
}

async function signIn(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
  try {
    await api("GET", "bindings");
  } catch (err) {
    // 403 is a valid key without configuration:read: it can still dry-run with ids typed in.
    if (err.status !== 403) {
      sessionStorage.removeItem(KEY_STORAGE);
      throw err;
    }
  }
  $("api-key").value = "";
  showSignedIn(true);
}

/** `#dryrun` or `#runs/<run id>`. */
function route() {
  const [tab, encodedRunId] = location.hash.slice(1).split("/");
  const runId = encodedRunId ? decodeURIComponent(encodedRunId) : "";
  const current = tab === "runs" ? "runs" : "dryrun";
  for (const button of $("tabs").querySelectorAll("button")) button.classList.toggle("active", button.dataset.tab === current);
  $("dryrun").hidden = current !== "dryrun";
  $("runs").hidden = current !== "runs";
  if (current === "runs" && runId && runId !== $("run-id").dataset.loaded) {
    $("run-id").value = runId;
    void busy($("run-form").querySelector("button"), $("run-error"), () => loadRun(runId));
  }
}

// ---- tool picking

/** The tools of the agent version picked last, by name. */
let tools = new Map();

function fillDatalist(id, values) {
  $(id).replaceChildren(...values.map((v) => el("option", { value: v })));
}

async function loadVersions() {
  const agent = $("agent").value.trim();
  const { versions } = await api("GET", `agents/${enc(agent)}/versions`);
  fillDatalist(
    "agent-versions",
    versions.map((v) => v.agent_version),
  );
  if (versions.length === 0) throw new ApiFailure(404, { error: { code: "no_agent_versions", message: `agent '${agent}' has no published version` } });
  $("agent-version").value = versions[versions.length - 1].agent_version;
  await loadTools();
}

async function loadTools() {
  const agentVersion = await api("GET", `agent-versions/${enc($("agent-version").value.trim())}`);
  const toolset = await api("GET", `toolsets/${enc(agentVersion.toolset)}/versions/${enc(agentVersion.toolset_version)}`);
  tools = new Map(toolset.tools.map((t) => [t.name, { ...t, agentVersion, toolset }]));
  fillDatalist("tools", [...tools.keys()]);
  if (!tools.has($("tool").value)) $("tool").value = toolset.tools[0]?.name ?? "";
  showToolInfo();
}

function showToolInfo() {
  const tool = tools.get($("tool").value.trim());
  const info = $("tool-info");
  info.hidden = !tool;
  if (!tool) return;
  const fact = (name, value) => [el("dt", {}, name), el("dd", {}, value)];
  info.replaceChildren(
    ...fact("description", tool.description),
    ...fact("binding", code(tool.binding_id)),
    ...fact("toolset", code(`${tool.toolset.toolset}/${tool.toolset.version}`)),
    ...fact("max_result_context_bytes", el("strong", {}, fmt(tool.max_result_context_bytes))),
    ...fact("max_context_tokens", fmt(tool.agentVersion.max_context_tokens)),
    ...fact("input_schema", el("pre", {}, JSON.stringify(tool.input_schema, null, 2))),
  );
}

// ---- dry-run

function parseField(id, path) {
  try {
    return JSON.parse($(id).value);
  } catch (err) {
    throw inputError(path, err.message);
  }
}

function dryRunRequest() {
  const sampleMode = document.querySelector("input[name=receipt-mode]:checked").value === "sample";
  const mockReceipts = sampleMode
    ? [{ receipt_id: SAMPLE_RECEIPT_ID, kind: "completed", result: parseField("sample", "result") }]
    : parseField("receipts", "mock_receipts");
  return {
    agent_version: $("agent-version").value.trim(),
    tool_name: $("tool").value.trim(),
    arguments: parseField("arguments", "arguments"),
    mock_receipts: mockReceipts,
  };
}

function watchedKeys() {
  const extra = $("watch")
    .value.split(",")
    .map((k) => k.trim())
    .filter(Boolean);
  const keys = new Set([...settings.status_keys, ...extra]);
  return (key) => keys.has(key) || key.endsWith(settings.status_key_suffix);
}

/** Watched keys of a JSON value, shallowest first, with their number of occurrences and first value. */
function watchedFields(value, isWatched) {
  const found = new Map();
  const queue = [value];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i];
    if (node === null || typeof node !== "object") continue;
    const entries = Array.isArray(node) ? node.map((v) => [null, v]) : Object.entries(node);
    for (const [key, child] of entries) {
      if (key !== null && isWatched(key)) {
        const field = found.get(key) ?? { count: 0, first: child };
        field.count++;
        found.set(key, field);
      }
      if (child !== null && typeof child === "object") queue.push(child);
    }
  }
  return found;
}

/** True when a projected result is the head/tail form (PreviewResult), not the result itself. */
const isPreviewForm = (result) =>
  result !== null && typeof result === "object" && typeof result.preview?.head === "string" && typeof result.preserved_fields === "object";
const keyText = (key) => `${JSON.stringify(key)}:`;
const lastSegment = (path) => path.slice(path.lastIndexOf(".") + 1);
const short = (value) => {
  const text = JSON.stringify(value);
  return text.length > 48 ? `${text.slice(0, 45)}…` : text;
};

/** At most a few paths, then how many more: a page of results can preserve hundreds of ids. */
function listed(paths, shown = 3) {
  return paths.length <= shown ? paths.join(", ") : `${paths.slice(0, shown).join(", ")} … +${fmt(paths.length - shown)} more`;
}

function renderVisibility(original, preview, isWatched) {
  const body = $("visibility").querySelector("tbody");
  const fields = watchedFields(original, isWatched);
  const form = isPreviewForm(preview.result);
  const inResult = form ? new Map() : watchedFields(preview.result, isWatched);
  const preserved = form ? Object.keys(preview.result.preserved_fields) : [];
  const yesNo = (hit, text) => el("span", { class: hit ? "hit" : "miss" }, hit ? text : "no");
  body.replaceChildren(
    ...[...fields].map(([key, { count, first }]) => {
      const paths = preserved.filter((p) => lastSegment(p) === key);
      const head = form && preview.result.preview.head.includes(keyText(key));
      const tail = form && preview.result.preview.tail.includes(keyText(key));
      const seen = inResult.get(key)?.count ?? 0;
      const kind = !form ? (seen > 0 ? "visible" : "lost") : paths.length > 0 ? "preserved" : head || tail ? "partial" : "lost";
      const verdict = { visible: `yes, ${seen} of ${count}`, preserved: "yes, preserved", partial: "only in head/tail text", lost: "NOT visible" }[kind];
      return el(
        "tr",
        { class: kind, "data-key": key },
        el("td", {}, code(key)),
        el("td", {}, `${fmt(count)}× `, el("span", { class: "muted" }, short(first))),
        el("td", {}, form ? yesNo(paths.length > 0, listed(paths)) : "—"),
        el("td", {}, form ? yesNo(head, "yes") : "—"),
        el("td", {}, form ? yesNo(tail, "yes") : "—"),
        el("td", {}, badge(verdict, kind === "lost" ? "bad" : kind === "partial" ? "warn" : "ok")),
      );
    }),
  );
  $("visibility-empty").hidden = fields.size > 0;
  $("visibility").hidden = fields.size === 0;
}

/** `text` with every watched JSON key (a quoted string followed by a colon) marked; preserved keys marked green. */
function highlighted(text, isWatched, preservedKeys) {
  const pre = el("pre");
  const keyPattern = /"((?:[^"\\]|\\.)*)"(?=\s*:)/g;
  let at = 0;
  for (const match of text.matchAll(keyPattern)) {
    let key;
    try {
      key = JSON.parse(match[0]);
    } catch {
      continue; // a cut escape at the edge of head or tail
    }
    if (!isWatched(key)) continue;
    pre.append(text.slice(at, match.index), el("mark", { class: preservedKeys.has(key) ? "preserved" : null }, match[0]));
    at = match.index + match[0].length;
  }
  pre.append(text.slice(at));
  return pre;
}

function renderProjected(preview, isWatched) {
  const out = $("projected");
  const result = preview.result;
  if (!isPreviewForm(result)) {
    out.replaceChildren(highlighted(JSON.stringify(result, null, 2), isWatched, new Set()));
    return;
  }
  const preservedKeys = new Set(Object.keys(result.preserved_fields).map(lastSegment));
  out.replaceChildren(
    el("div", { class: "block-label" }, "notice"),
    el("pre", {}, result.notice),
    el("div", { class: "block-label" }, "preserved_fields"),
    highlighted(JSON.stringify(result.preserved_fields, null, 2), isWatched, preservedKeys),
    el("div", { class: "block-label" }, "preview.head"),
    highlighted(result.preview.head, isWatched, preservedKeys),
    el("div", { class: "omitted", "data-omitted": result.preview.omitted_bytes }, `… ${fmt(result.preview.omitted_bytes)} bytes omitted …`),
    el("div", { class: "block-label" }, "preview.tail"),
    highlighted(result.preview.tail, isWatched, preservedKeys),
  );
}

function renderPreserved(preview) {
  const form = isPreviewForm(preview.result);
  $("preserved-card").hidden = !form;
  if (!form) return;
  const entries = Object.entries(preview.result.preserved_fields);
  $("preserved-caption").textContent = `${fmt(entries.length)} short status fields kept beside head and tail, inside the same byte budget.`;
  $("preserved")
    .querySelector("tbody")
    .replaceChildren(
      ...(entries.length > 0
        ? entries.map(([path, value]) => el("tr", { "data-path": path }, el("td", {}, code(path)), el("td", {}, code(JSON.stringify(value)))))
        : [el("tr", {}, el("td", { colspan: 2, class: "muted" }, "none fitted"))]),
    );
}

function setBytes(id, n) {
  $(id).textContent = fmt(n);
  $(id).dataset.bytes = String(n);
}

function renderDryRun(response, original) {
  const preview = response.context_preview;
  const isWatched = watchedKeys();
  $("verified-value").textContent = String(response.execution_verified);
  $("preview-tool").textContent = `${response.tool_name} · ${response.agent_version} · toolset ${response.toolset}/${response.toolset_version}`;
  $("no-preview").hidden = preview !== null;
  for (const id of ["preview-stats", "visibility-card", "preserved-card"]) $(id).hidden = preview === null;
  $("projected").closest(".card").hidden = preview === null;
  $("raw-response").textContent = JSON.stringify(response, null, 2);
  if (preview !== null) {
    setBytes("original-bytes", preview.original_bytes);
    setBytes("retained-bytes", preview.retained_bytes);
    setBytes("budget-bytes", preview.max_result_context_bytes);
    $("truncated").replaceChildren(badge(preview.truncated ? "yes" : "no"));
    const share = preview.retained_bytes / preview.max_result_context_bytes;
    $("meter-fill").style.width = `${Math.min(100, share * 100)}%`;
    $("meter-fill").classList.toggle("over", share > 1);
    $("meter-caption").textContent = preview.truncated
      ? `Truncated: ${fmt(preview.original_bytes - preview.retained_bytes)} bytes cut; ${((preview.retained_bytes / preview.original_bytes) * 100).toFixed(1)}% of the original kept, ${(share * 100).toFixed(0)}% of the budget used.`
      : `Fits: ${fmt(preview.max_result_context_bytes - preview.retained_bytes)} bytes of the budget to spare; the result enters history unchanged.`;
    renderVisibility(original, preview, isWatched);
    renderPreserved(preview);
    renderProjected(preview, isWatched);
  }
  $("dryrun-empty").hidden = true;
  $("dryrun-result").hidden = false;
}

async function runDryRun() {
  $("dryrun-result").hidden = true;
  const request = dryRunRequest();
  const completed = Array.isArray(request.mock_receipts) ? request.mock_receipts.find((r) => r?.kind === "completed") : undefined;
  const response = await api("POST", "tools/dry-run", request);
  renderDryRun(response, completed?.result);
}

// ---- runs

function facts(dl, pairs) {
  dl.replaceChildren(...pairs.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
}

const previewSummary = (p) => (p ? `${fmt(p.retained_bytes)} / ${fmt(p.original_bytes)} B${p.truncated ? " · truncated" : ""}` : "—");
const outcomeText = (o) => (!o ? "" : o.error ? `${o.error.code}: ${o.error.message}` : (o.reason ?? o.kind));

async function loadRun(runId) {
  $("run-view").hidden = true;
  const [run, history] = await Promise.all([api("GET", `runs/${enc(runId)}`), api("GET", `runs/${enc(runId)}/history`)]);
  $("run-id").dataset.loaded = runId;
  $("run-state").replaceChildren(badge(run.state));
  facts($("run-facts"), [
    ["run_id", code(run.run_id)],
    ["session", code(run.session_id)],
    ["agent_version", code(run.agent_version)],
    ["toolset", code(`${run.toolset}/${run.toolset_version}`)],
    ["subject", run.subject],
    ["created", time(run.created_at)],
    ["ended", time(run.ended_at)],
  ]);
  // A background task's result is an entry of its own, after the tool calls made before it arrived.
  const taskRows = (after) =>
    history.task_results
      .filter((t) => t.after_tool_calls === after)
      .map((t) =>
        el(
          "tr",
          { class: "task-result", title: `task ${t.task_ref}` },
          el("td", {}, "↳"),
          el("td", {}, code(t.tool_name)),
          el("td", {}, code(t.assignment_id)),
          el("td", {}, badge(t.state)),
          el("td", {}, previewSummary(t.context_preview)),
          el("td", {}, outcomeText(t.outcome)),
        ),
      );
  const rows = history.tool_calls.flatMap((call, i) => {
    const detail = el("tr", { class: "detail", hidden: true }, el("td", { colspan: 6 }));
    const row = el(
      "tr",
      { class: "call", "data-assignment": call.assignment_id, title: "show the assignment" },
      el("td", {}, i + 1),
      el("td", {}, code(call.tool_name)),
      el("td", {}, code(call.assignment_id)),
      el("td", {}, badge(call.state)),
      el("td", {}, previewSummary(call.context_preview)),
      el("td", {}, outcomeText(call.outcome)),
    );
    row.addEventListener("click", () => toggleAssignment(detail, call.assignment_id));
    return [row, detail, ...taskRows(i + 1)];
  });
  $("tool-calls")
    .querySelector("tbody")
    .replaceChildren(...rows);
  $("tool-calls-empty").hidden = rows.length > 0;
  $("run-view").hidden = false;
  await loadContext(runId);
}

async function toggleAssignment(detail, assignmentId) {
  detail.hidden = !detail.hidden;
  if (detail.hidden || detail.dataset.loaded) return;
  const cell = detail.firstChild;
  try {
    const a = await api("GET", `assignments/${enc(assignmentId)}`);
    const dl = el("dl", { class: "facts" });
    facts(dl, [
      ["state", badge(a.state)],
      ["tool_kind", a.tool_kind],
      ["binding", code(a.binding_id)],
      ["executor", a.executor_id ? code(a.executor_id) : "—"],
      ["generation", a.generation],
      ["lease expires", time(a.lease_expires_at)],
      ["accepted receipt", a.accepted_receipt_id ? code(a.accepted_receipt_id) : "—"],
      ["final receipt", a.final_receipt_id ? code(a.final_receipt_id) : "—"],
      ["progress reports", a.progress.length],
      ...(a.task
        ? [
            ["task", code(a.task.task_ref)],
            ["task status", a.task.status],
            ["task deadline", time(a.task.deadline_at)],
          ]
        : []),
      ["operation_key", code(a.operation_key)],
      ["argument_digest", code(a.argument_digest)],
      ["updated", time(a.updated_at)],
    ]);
    cell.replaceChildren(
      dl,
      el("div", { class: "block-label" }, "arguments"),
      el("pre", {}, JSON.stringify(a.arguments, null, 2)),
      ...(a.context_preview
        ? [el("div", { class: "block-label" }, "stored projection (what the model sees)"), el("pre", {}, JSON.stringify(a.context_preview.result, null, 2))]
        : []),
    );
    detail.dataset.loaded = "1";
  } catch (err) {
    showError(cell, err);
  }
}

/** How the ratio was obtained (docs/architecture.md#context-window: a median, never above the default before a few reports). */
function ratioSource(reports) {
  if (reports === 0) return "conservative default: no usage report yet";
  const counted = `${fmt(reports)} usage report${reports === 1 ? "" : "s"}`;
  const needed = settings.min_calibration_reports;
  return reports < needed ? `${counted}; at most the default until ${needed}` : `median of the latest, ${counted}`;
}

async function loadContext(runId) {
  showError($("context-error"), null);
  try {
    const c = await api("GET", `runs/${enc(runId)}/context`);
    $("must-compact").replaceChildren(badge(c.must_compact ? "must compact" : "fits", c.must_compact ? "bad" : "ok"));
    facts($("context-facts"), [
      ["bytes", `${fmt(c.bytes)} (history ${fmt(c.history_bytes)} + prompt text ${fmt(c.prompt_text_bytes)})`],
      ["estimated_tokens", el("strong", {}, fmt(c.estimated_tokens))],
      ["max_context_tokens", fmt(c.max_context_tokens)],
      ["bytes_per_token", `${c.bytes_per_token.toFixed(3)} (${ratioSource(c.calibrated_from)})`],
    ]);
    const share = c.estimated_tokens / c.max_context_tokens;
    $("context-fill").style.width = `${Math.min(100, share * 100)}%`;
    $("context-fill").classList.toggle("over", c.must_compact);
  } catch (err) {
    showError($("context-error"), err);
  }
}

// ---- wiring

function wire() {
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void busy(event.submitter ?? $("signin-form").querySelector("button"), $("signin-error"), () => signIn($("api-key").value.trim()));
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    showSignedIn(false);
  });
  for (const button of $("tabs").querySelectorAll("button")) button.addEventListener("click", () => (location.hash = button.dataset.tab));
  window.addEventListener("hashchange", route);

  $("load-versions").addEventListener("click", () => busy($("load-versions"), $("tool-error"), loadVersions));
  $("agent").addEventListener("keydown", (event) => {
    if (event.key === "Enter") $("load-versions").click();
  });
  $("agent-version").addEventListener("change", () => busy($("load-versions"), $("tool-error"), loadTools));
  $("tool").addEventListener("input", showToolInfo);
  for (const radio of document.querySelectorAll("input[name=receipt-mode]")) {
    radio.addEventListener("change", () => {
      $("mode-sample").hidden = radio.value !== "sample" || !radio.checked;
      $("mode-receipts").hidden = radio.value !== "receipts" || !radio.checked;
    });
  }
  $("sample-file").addEventListener("change", async () => {
    const file = $("sample-file").files[0];
    if (file) $("sample").value = await file.text();
  });
  $("run-dry-run").addEventListener("click", () => busy($("run-dry-run"), $("dryrun-error"), runDryRun));
  $("run-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const runId = $("run-id").value.trim();
    if (location.hash === `#runs/${enc(runId)}`) void busy($("run-form").querySelector("button"), $("run-error"), () => loadRun(runId));
    else location.hash = `runs/${enc(runId)}`;
  });
}

async function start() {
  wire();
  settings = await fetch("settings.json").then((r) => r.json());
  showSignedIn(sessionStorage.getItem(KEY_STORAGE) !== null);
  document.body.dataset.ready = "1";
}

void start();
