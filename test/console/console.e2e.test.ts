import { mkdirSync } from "node:fs";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../helpers/browser.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { bindingExample, tasksRead } from "../helpers/gateway.js";
import { ADMIN_KEY, completeToolCall, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";

const ARTIFACTS = "test-artifacts";

/** About 200 KiB: a page of tasks with the cursor and status the model must still see. */
function bigResult() {
  const tasks = Array.from({ length: 1000 }, (_, i) => ({ id: `task-${i}`, title: `Task ${i} `.padEnd(180, "x"), done: i % 2 === 0 }));
  return { status: "ok", next_cursor: "page-2", tasks };
}

const digits = (text: string | null) => Number((text ?? "").replace(/[^0-9]/g, ""));

describe("console in headless Chromium", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let baseUrl: string;
  let nc: NatsConnection;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await gw.http(method, path, body);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url);
    baseUrl = gw.baseUrl;
    // Configuration through the API, as an operator would publish it.
    await api("POST", "/v1/bindings", bindingExample);
    await api("POST", "/v1/toolsets/tasks/versions", { version: "v1", tools: [tasksRead] });
    await api("POST", "/v1/agents/bot/versions", { toolset: "tasks", toolset_version: "v1", max_context_tokens: 128000 });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    page.on("request", (request) => void requested.push(request.url()));
    await page.goto(`${baseUrl}/console`);
    await page.locator("body[data-ready]").waitFor({ state: "attached" });
  });
  afterAll(async () => {
    await browser?.close();
    await nc?.close();
    await gw?.close();
    await nats?.stop();
  });

  it("refuses an unknown key with the gateway's error, then signs in", async () => {
    await page.fill("#api-key", "not-a-configured-key-000");
    await page.click("#signin-form button[type=submit]");
    await expect.poll(() => page.locator("#signin-error .code").textContent()).toBe("unauthenticated");
    expect(await page.locator("#signin-error .status").textContent()).toBe("HTTP 401");

    await page.fill("#api-key", ADMIN_KEY);
    await page.click("#signin-form button[type=submit]");
    await page.locator("#tabs").waitFor();
    expect(await page.evaluate('sessionStorage.getItem("toolgate.apiKey")')).toBe(ADMIN_KEY);
    expect(await page.locator("#api-key").inputValue()).toBe("");
  });

  it("picks the agent version and tool from the configuration API", async () => {
    await page.fill("#agent", "bot");
    await page.click("#load-versions");
    await expect.poll(() => page.locator("#tool").inputValue()).toBe("tasks.read");
    expect(await page.locator("#agent-version").inputValue()).toBe("bot.1");
    expect(await page.locator("#tool-info").textContent()).toContain("16,384");
  });

  it("shows structured errors readably: code, status, path", async () => {
    await page.fill("#arguments", '{"cursor": 5}');
    await page.click("#run-dry-run");
    await expect.poll(() => page.locator("#dryrun-error .code").textContent()).toBe("validation_failed");
    expect(await page.locator("#dryrun-error .status").textContent()).toBe("HTTP 400");
    expect(await page.locator("#dryrun-error tbody td").first().textContent()).toBe("arguments.cursor");

    await page.fill("#arguments", "{oops");
    await page.click("#run-dry-run");
    await expect.poll(() => page.locator("#dryrun-error .code").textContent()).toBe("invalid_json");
    expect(await page.locator("#dryrun-error tbody td").first().textContent()).toBe("arguments");
    await page.fill("#arguments", "{}");
  });

  it("dry-runs a 200 KiB sample and shows the API's context_preview", async () => {
    const big = bigResult();
    const sample = JSON.stringify(big, null, 1);
    expect(sample.length).toBeGreaterThan(200 * 1024);
    // As an operator would bring a real sample of that size: from a file.
    await page.setInputFiles("#sample-file", { name: "tasks-page.json", mimeType: "application/json", buffer: Buffer.from(sample) });
    await expect.poll(async () => (await page.locator("#sample").inputValue()).length).toBe(sample.length);
    await page.click("#run-dry-run");
    await page.locator("#dryrun-result").waitFor();
    expect(await page.locator("#dryrun-error").textContent()).toBe("");

    const expected = await api("POST", "/v1/tools/dry-run", {
      agent_version: "bot.1",
      tool_name: "tasks.read",
      arguments: {},
      mock_receipts: [{ receipt_id: "console-sample", kind: "completed", result: big }],
    });
    const preview = expected.context_preview;
    expect(preview.truncated).toBe(true);

    expect(digits(await page.locator("#original-bytes").textContent())).toBe(preview.original_bytes);
    expect(digits(await page.locator("#retained-bytes").textContent())).toBe(preview.retained_bytes);
    expect(digits(await page.locator("#budget-bytes").textContent())).toBe(16384);
    expect(await page.locator("#truncated").textContent()).toBe("yes");
    expect(await page.locator("#verified-value").textContent()).toBe("false");
    expect(await page.locator("#verified").isVisible()).toBe(true);
    expect(digits(await page.locator("[data-omitted]").textContent())).toBe(preview.result.preview.omitted_bytes);

    // next_cursor: preserved, highlighted, and whether it appears in head/tail exactly as the API's text says.
    const cursor = page.locator('#visibility tr[data-key="next_cursor"]');
    expect(await cursor.getAttribute("class")).toBe("preserved");
    const cells = await cursor.locator("td").allTextContents();
    expect(cells[2]).toBe("next_cursor");
    expect(cells[3]).toBe(preview.result.preview.head.includes('"next_cursor":') ? "yes" : "no");
    expect(cells[4]).toBe(preview.result.preview.tail.includes('"next_cursor":') ? "yes" : "no");
    expect(cells[5]).toBe("yes, preserved");
    expect(await page.locator('#preserved tr[data-path="next_cursor"] td').allTextContents()).toEqual(["next_cursor", '"page-2"']);
    expect(await page.locator("#projected mark.preserved").allTextContents()).toContain('"next_cursor"');
    expect(await page.locator('#visibility tr[data-key="status"]').getAttribute("class")).toBe("preserved");

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/console-dry-run.png`, fullPage: true });
    expect(requested.every((url) => url.startsWith(baseUrl))).toBe(true); // offline: nothing but this gateway
  });

  it("a result within budget is shown unchanged, every field visible", async () => {
    await page.fill("#sample", '{"next_cursor": "page-2", "tasks": []}');
    await page.click("#run-dry-run");
    await expect.poll(() => page.locator("#truncated").textContent()).toBe("no");
    expect(digits(await page.locator("#original-bytes").textContent())).toBe(35);
    expect(await page.locator('#visibility tr[data-key="next_cursor"]').getAttribute("class")).toBe("visible");
    expect(await page.locator("#preserved-card").isVisible()).toBe(false);
  });

  it("shows a run's history, its assignments with their states, and its context window (read-only)", async () => {
    const session = await api("POST", "/v1/sessions", { agent_version: "bot.1", subject: "user-1" });
    const runId: string = (await api("POST", `/v1/sessions/${session.session_id}/runs`)).run_id;
    nc = await connect({ servers: nats.url });
    const executor = new ProtocolExecutor(nc, bindingExample.executor_scope, "exec-console", [bindingExample.binding_id]);
    const done = await completeToolCall(gw, executor, runId, "tasks.read", bigResult());
    const pending = (await api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: { cursor: "page-2" } })).assignment.assignment_id;
    await api("POST", `/v1/runs/${runId}/usage`, { input_tokens: 6_000, prompt_text_bytes: 4_000 });
    executor.close();
    const [history, context] = [await api("GET", `/v1/runs/${runId}/history`), await api("GET", `/v1/runs/${runId}/context`)];

    await page.click('#tabs button[data-tab="runs"]');
    await page.fill("#run-id", runId);
    await page.click("#run-form button[type=submit]");
    await page.locator("#run-view").waitFor();
    await page.locator("#context-facts dd").first().waitFor();
    expect(page.url()).toContain(`#runs/${runId}`);
    expect(await page.locator("#run-state").textContent()).toBe("active");

    const rows = page.locator("#tool-calls tr.call");
    expect(await rows.count()).toBe(2);
    const first = await rows.nth(0).locator("td").allTextContents();
    const preview = history.tool_calls[0].context_preview;
    expect(first.slice(1, 5)).toEqual([
      "tasks.read",
      done,
      "completed",
      `${preview.retained_bytes.toLocaleString("en-US")} / ${preview.original_bytes.toLocaleString("en-US")} B · truncated`,
    ]);
    expect((await rows.nth(1).locator("td").allTextContents()).slice(2, 4)).toEqual([pending, "pending"]);

    await rows.nth(0).click();
    const detail = page.locator("#tool-calls tr.detail").first();
    await detail.locator("dl").waitFor();
    expect(await detail.textContent()).toContain("exec-console");
    expect(await detail.textContent()).toContain("stored projection");

    const facts = await page.locator("#context-facts dd").allTextContents();
    expect(digits(facts[1]!)).toBe(context.estimated_tokens);
    expect(digits(facts[2]!)).toBe(128_000);
    expect(await page.locator("#must-compact").textContent()).toBe(context.must_compact ? "must compact" : "fits");
    await page.screenshot({ path: `${ARTIFACTS}/console-run.png`, fullPage: true });
  });
});
