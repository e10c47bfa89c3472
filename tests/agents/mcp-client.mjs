// A client of `baton mcp` built on the official MCP TypeScript SDK (pinned in package.json),
// as an agent's host would be: it lists the tools, checks a bad graph, starts a run whose
// task waits for approval, follows its events, approves it, reads a log's tail, and cancels
// a second run. Prints what it saw as one JSON document for the test to judge.
//   node mcp-client.mjs BATON   (run in the repository to serve)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const baton = process.argv[2];
const client = new Client({ name: "baton-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: baton, args: ["mcp"], cwd: process.cwd(), stderr: "inherit" }));
const seen = {};
const call = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  return result.isError ? { error: result.content[0].text } : result.structuredContent;
};
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const until = async (what, check) => {
  for (let i = 0; i < 600; i++) {
    const value = await check();
    if (value) return value;
    await sleep(100);
  }
  throw new Error(`never: ${what}`);
};

seen.server = client.getServerVersion();
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
seen.bad = await call("validate_graph", {
  graph: '[[task]]\nid = "a"\nrun = "true"\nneeds = ["ghost"]\n\n[[task]]\nid = "b"\nrun = 1\n',
});

const graph = '[[task]]\nid = "build"\nrun = "echo built"\n\n[[task]]\nid = "deploy"\nneeds = ["build"]\napproval = true\nrun = "echo deployed"\n';
const started = await call("start_run", { graph, name: "approved" });
seen.started = started;
const run = started.run;
// Events a page at a time, until the deploy waits for a person.
let after = 0;
const kinds = [];
await until("deploy to wait", async () => {
  const page = await call("run_events", { run, after_seq: after, limit: 5 });
  for (const e of page.events) kinds.push(e.kind);
  after = page.last_seq;
  return kinds.includes("task-waiting");
});
seen.approved = await call("approve", { run, task: "deploy" });
seen.ended = await until("the run to end", async () => {
  const status = await call("run_status", { run });
  return status.run.state !== "running" && status.run.state !== "waiting" ? status : null;
});
await until("the run's last events", async () => {
  const page = await call("run_events", { run, after_seq: after, limit: 50 });
  for (const e of page.events) kinds.push(e.kind);
  after = page.last_seq;
  return kinds.includes("run-finished");
});
seen.kinds = kinds;
seen.log = await call("task_log", { run, task: "deploy" });

const slow = await call("start_run", { graph: '[[task]]\nid = "slow"\nrun = "sleep 60"\n', name: "slow" });
await until("slow to start", async () => (await call("run_status", { run: slow.run })).tasks?.[0]?.state === "running");
seen.cancel = await call("cancel_run", { run: slow.run });
seen.cancelled = await until("slow to end", async () => {
  const status = await call("run_status", { run: slow.run });
  return status.run.state !== "running" ? status.run.state : null;
});
seen.missing = await call("run_status", { run: "20990101-000000-0000" });

console.log(JSON.stringify(seen));
await client.close();
