// The status page in a real headless Chromium, driven by playwright-core (tests/it/operator.rs).
//
//   node status_page.mjs --url http://127.0.0.1:PORT/ --out DIR --expect-nodes a,b \
//       --graph-group G --nack-node b --put URL --put-body FILE --token T [--node-path DIR]
//
// Loads the page, waits for every expected node's row, draws the graph of --graph-group, then
// PUTs --put-body to --put (an intent API write that a node will reject) and times how long
// the page takes to show that node's rejection. Screenshots nodes.png, graph.png and nack.png go
// to --out. Prints one JSON line: {"ok", "console_errors", "graph_vertices", "nack_ms", "error"}.
//
// Reading what the page shows (tests/it/operator_trust.rs), after the steps above:
//   --expect-group 'G:current=0,rejected=1'   wait (up to --expect-ms, default 10000) until the
//                                              node groups table's row for G shows those counts
//                                              (columns nodes, current, pending, rejected)
//   --groups                                  add "groups": every row of that table, as numbers
//   --node-row ID                             add "node_rows": the nodes table's rows for ID
//                                              ({id, group, client, connected, plan, plan_class,
//                                              versions}), once there is one
//   --nacks                                   add "nacks": every rejection box ({node, text})
//   --shot NAME                               a screenshot NAME.png of the whole page to --out
// The page is loaded fresh, so what it shows was fetched after the caller's state was set.

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const nodePath = args["node-path"] || process.env.XDST_NODE_PATH || "";
const require = createRequire(path.join(nodePath, "noop.js"));
const { chromium } = require("playwright-core");

const out = { ok: false, console_errors: [], graph_vertices: 0, nack_ms: null, error: "" };
let browser;
try {
  browser = await chromium.launch({
    executablePath: args.chromium || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("console", (m) => { if (m.type() === "error") out.console_errors.push(m.text()); });
  page.on("pageerror", (e) => out.console_errors.push(String(e)));
  await page.goto(args.url, { waitUntil: "load" });
  for (const node of (args["expect-nodes"] || "").split(",").filter(Boolean)) {
    await page.waitForSelector(`#nodes tr[data-node="${node}"]`, { timeout: 30000 });
  }
  await page.screenshot({ path: path.join(args.out, "nodes.png"), fullPage: true });

  if (args["graph-group"] !== undefined) {
    await page.selectOption("#graph-group", args["graph-group"]);
    await page.waitForSelector('#graph svg g[data-kind="listener"]', { timeout: 15000 });
    out.graph_vertices = Number(await page.getAttribute("#graph svg", "data-vertices"));
    await page.locator("#graph").scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(args.out, "graph.png"), fullPage: true });
  }

  if (args.put) {
    const r = await fetch(args.put, {
      method: "PUT",
      headers: { Authorization: "Bearer " + args.token },
      body: readFileSync(args["put-body"], "utf8"),
    });
    if (!r.ok) throw new Error(`PUT ${args.put}: ${r.status} ${await r.text()}`);
    const written = Date.now();
    await page.waitForSelector(`#nacks .nack[data-node="${args["nack-node"]}"]`, { timeout: 30000 });
    out.nack_ms = Date.now() - written;
    await page.locator("#nacks").scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(args.out, "nack.png"), fullPage: true });
    out.nack_text = await page.textContent(`#nacks .nack[data-node="${args["nack-node"]}"]`);
  }
  await readBack(page);
  out.ok = true;
} catch (e) {
  out.error = String(e && e.stack || e);
} finally {
  if (browser) await browser.close();
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

// The node groups table as numbers: [{group, nodes, current, pending, rejected}].
async function groupRows(page) {
  return page.$$eval("#groups tr[data-group]", (rows) => rows.map((r) => {
    const n = [...r.cells].map((c) => c.textContent.trim());
    return { group: r.getAttribute("data-group"), nodes: +n[1], current: +n[2], pending: +n[3], rejected: +n[4] };
  }));
}

async function readBack(page) {
  if (args["expect-group"] !== undefined) {
    const at = args["expect-group"].lastIndexOf(":");
    const group = args["expect-group"].slice(0, at);
    const want = Object.fromEntries(args["expect-group"].slice(at + 1).split(",").map((kv) => kv.split("=")).map(([k, v]) => [k, +v]));
    const deadline = Date.now() + Number(args["expect-ms"] || 10000);
    for (;;) {
      out.groups = await groupRows(page);
      const row = out.groups.find((r) => r.group === group);
      if (row && Object.entries(want).every(([k, v]) => row[k] === v)) break;
      if (Date.now() > deadline) {
        throw new Error(`group ${JSON.stringify(group)} never showed ${JSON.stringify(want)}; the page shows ${JSON.stringify(out.groups)}`);
      }
      await page.waitForTimeout(100);
    }
  }
  if ("groups" in args) {
    await page.waitForSelector("#groups tr[data-group]", { timeout: 15000 });
    out.groups = await groupRows(page);
  }
  if (args["node-row"] !== undefined) {
    await page.waitForSelector(`#nodes tr[data-node="${args["node-row"]}"]`, { timeout: 15000 });
    out.node_rows = await page.$$eval(`#nodes tr[data-node="${args["node-row"]}"]`, (rows) => rows.map((r) => {
      const c = [...r.cells].map((x) => x.textContent.trim());
      return { id: c[0], group: c[1], client: c[2], connected: c[3], plan: c[4], plan_class: r.cells[4].className, versions: c[5] };
    }));
  }
  if ("nacks" in args) {
    out.nacks = await page.$$eval("#nacks .nack", (boxes) => boxes.map((b) => ({ node: b.getAttribute("data-node"), text: b.textContent })));
  }
  if (args.shot) await page.screenshot({ path: path.join(args.out, args.shot + ".png"), fullPage: true });
}
