import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { launchChromium } from "../helpers/browser.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, bindingExample, startTestGateway, tasksRead } from "../helpers/gateway.js";

const SCREENSHOT = "test-artifacts/console-dry-run.png";

/** About 200 KiB: a page of tasks with the cursor and status the model must still see. */
function bigResult() {
  const tasks = Array.from({ length: 1000 }, (_, i) => ({ id: `task-${i}`, title: `Task ${i} `.padEnd(180, "x"), done: i % 2 === 0 }));
  return { status: "ok", next_cursor: "page-2", tasks };
}

const digits = (text: string | null) => Number((text ?? "").replace(/[^0-9]/g, ""));

describe("console in headless Chromium", () => {
  let nats: TestNats;
  let gw: Gateway;
  let baseUrl: string;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];

  const api = async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await fetch(baseUrl + path, {
      method,
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await res.json();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startTestGateway(nats.url);
    baseUrl = await gw.listen();
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

    mkdirSync("test-artifacts", { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
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
});
