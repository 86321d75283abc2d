// Long runs through cexec's MCP face, driven by the official TypeScript SDK
// client (@modelcontextprotocol/sdk, pinned in test/peers/package.json) over
// streamable HTTP, or over stdio through `cexecctl mcp` as Claude Desktop
// connects:
//
//   1. progress: a program prints lines, then reports with cexec.progress;
//      the client's onprogress sees both, worded by cexec, increasing, with
//      PII tokenized;
//   2. upstream: a program calls server-everything's long-running tool; its
//      progress reaches the client as progress on execute_code; a tool that
//      logs leaves its log out of the reply (the Go test finds it in the
//      session log);
//   3. cancel: the client aborts a running execute_code (the SDK sends
//      notifications/cancelled); the program's child process ends (and the
//      Go test checks the session log says so);
//   4. task: execute_code runs as an MCP task the client polls (tasks/get)
//      to completion and reads with tasks/result, with progress on the way;
//   5. task cancel: tasks/cancel stops a task's program and its child.
//
// Environment:
//   MCP_URL          the face's streamable HTTP endpoint, or
//   CEXECCTL and CEXECD_ADDRESS  the cexecctl binary and the daemon's control
//                    socket, to go through `cexecctl mcp` over stdio
//   MCP_E2E_SERVER   name of the upstream server-everything (default "everything")
//   CANCEL_MARK      a number the cancelled programs' children carry in their
//                    command line, for the Go test to look for (required)
//
// Prints one JSON line with what it saw; exits 1 with a message on the
// first check that fails.
import { readdirSync, readFileSync } from "node:fs";
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StreamableHTTPClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";

const url = process.env.MCP_URL;
const ctl = process.env.CEXECCTL;
const server = process.env.MCP_E2E_SERVER || "everything";
const mark = process.env.CANCEL_MARK;
if (!(url || ctl) || !mark) {
  console.error("progress.mjs: set MCP_URL (or CEXECCTL and CEXECD_ADDRESS) and CANCEL_MARK");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`progress.mjs: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

// marked reports whether a process whose command line holds tag runs on
// this machine (a sandbox's processes included).
function marked(tag) {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(tag)) return true;
    } catch {
      // gone meanwhile
    }
  }
  return false;
}

// waitFor polls cond; the limit only keeps a broken run from hanging.
async function waitFor(cond, what) {
  for (let i = 0; i < 600; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(false, `gave up waiting for ${what}`);
}

function increasing(notes) {
  return notes.every((n, i) => i === 0 || n.progress > notes[i - 1].progress);
}

const transport = url ? new StreamableHTTPClientTransport(new URL(url))
  : new StdioClientTransport({ command: ctl, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "cexec-e2e-progress", version: "1.0.0" });
await client.connect(transport);
const seen = { transport: url ? "http" : "stdio" };
const timeout = 120000;

// 0. execute_code says it can run as a task.
const { tools } = await client.listTools();
const exec = tools.find((t) => t.name === "execute_code");
check(exec?.execution?.taskSupport === "optional", "execute_code does not offer task support", exec);

// 1. Printed lines, then the program's own progress.
const printing = [
  "import time, cexec",
  "for i in range(3):",
  "    print(f'step {i} mail jane.roe@example.com', flush=True)",
  "    time.sleep(0.6)",
  "for i in range(1, 4):",
  "    cexec.progress(i, 3, f'chunk {i} for jane.roe@example.com')",
  "    time.sleep(0.6)",
  "print('printed and reported')",
].join("\n");
const notes = [];
const res1 = await client.callTool({ name: "execute_code", arguments: { code: printing } }, undefined,
  { onprogress: (p) => notes.push(p), timeout });
check(!res1.isError && text(res1).includes("printed and reported"), "the progress program failed", res1);
check(notes.length >= 2, "fewer than two progress notifications", notes);
check(increasing(notes), "progress did not increase", notes);
const lines = notes.filter((n) => / lines? printed/.test(n.message || ""));
// Lines were reported before, so the program's 1/3, 2/3, 3/3 do not
// exceed the last report: they advance by one with the numbers in the
// message.
const own = notes.filter((n) => /^[123]\/3: chunk [123] /.test(n.message || ""));
check(lines.length > 0 && lines.some((n) => n.message.includes("step")), "no notification for printed lines", notes);
check(own.length > 0, "no notification from cexec.progress", notes);
check(notes.every((n) => !(n.message || "").includes("jane.roe@example.com")), "a progress message leaked an e-mail address", notes);
check(notes.some((n) => /\[EMAIL_\d+\]/.test(n.message || "")), "no progress message carries the e-mail's token", notes);
seen.progress = notes;

// 2. An upstream's progress during a call.
const upstream = [
  `from servers.${server} import trigger_long_running_operation`,
  "print(trigger_long_running_operation(duration=2, steps=4))",
].join("\n");
const upNotes = [];
const res2 = await client.callTool({ name: "execute_code", arguments: { code: upstream } }, undefined,
  { onprogress: (p) => upNotes.push(p), timeout });
check(!res2.isError && text(res2).includes("Long running operation completed"), "the upstream program failed", res2);
check(upNotes.some((n) => (n.message || "").includes(`${server}/trigger-long-running-operation`)),
  "no upstream progress was forwarded", upNotes);
check(increasing(upNotes), "upstream progress did not increase", upNotes);
seen.upstream = upNotes;

// 2b. An upstream's log messages go to the session log, not to the model:
// server-everything logs once as simulated logging starts (the second call
// stops it). The Go test reads the session log.
const logging = [
  `from servers.${server} import toggle_simulated_logging`,
  "toggle_simulated_logging()",
  "toggle_simulated_logging()",
  "print('logging toggled')",
].join("\n");
const res2b = await client.callTool({ name: "execute_code", arguments: { code: logging } }, undefined, { timeout });
check(!res2b.isError && text(res2b).includes("logging toggled"), "the logging program failed", res2b);
check(!/level[ -]message/i.test(JSON.stringify(res2b)), "an upstream log message reached the reply", res2b);

// A program that starts a child carrying the mark, says so, and waits.
function sleeper(n) {
  return [
    "import subprocess, sys, time",
    `child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(${mark}.${n})'])`,
    "print('started', flush=True)",
    "time.sleep(600)",
  ].join("\n");
}

// 3. Cancel: abort once the program reports it started.
const abort = new AbortController();
let cancelErr;
try {
  await client.callTool({ name: "execute_code", arguments: { code: sleeper(1) } }, undefined, {
    signal: abort.signal, timeout,
    onprogress: (p) => { if ((p.message || "").includes("started")) abort.abort("the test cancels"); },
  });
} catch (e) {
  cancelErr = String(e);
}
check(cancelErr !== undefined, "the aborted call returned a result");
await waitFor(() => !marked(`${mark}.1`), "the cancelled program's child to end");
seen.cancelled = cancelErr;

// 4. A task polled to completion.
const taskCode = [
  "import time, cexec",
  "for i in range(1, 5):",
  "    cexec.progress(i, 4, f'task step {i}')",
  "    time.sleep(0.6)",
  "print('task done')",
].join("\n");
const taskNotes = [];
const statuses = [];
let taskResult;
for await (const m of client.experimental.tasks.callToolStream({ name: "execute_code", arguments: { code: taskCode } },
  undefined, { task: { ttl: 60000 }, onprogress: (p) => taskNotes.push(p), timeout })) {
  if (m.type === "taskCreated" || m.type === "taskStatus") statuses.push(m.task.status);
  if (m.type === "result") taskResult = m.result;
  check(m.type !== "error", "the task failed", String(m.error));
}
check(statuses[0] === "working", "the task did not start working", statuses);
check(statuses.at(-1) === "completed", "the task did not complete", statuses);
check(taskResult && text(taskResult).includes("task done"), "tasks/result lacks the program's output", taskResult);
// The program reported from its start: its own numbers go out as they are.
check(taskNotes.some((n) => n.total === 4 && n.progress >= 1 && n.progress <= 4 && n.message.startsWith("task step")),
  "no progress from the task's program", taskNotes);
seen.task = { statuses, progress: taskNotes };

// 5. tasks/cancel stops a task's program.
const { CreateTaskResultSchema } = await import("../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js");
const created = await client.request({ method: "tools/call",
  params: { name: "execute_code", arguments: { code: sleeper(2) }, task: { ttl: 60000 } } }, CreateTaskResultSchema);
const id = created.task.taskId;
await waitFor(() => marked(`${mark}.2`), "the task's program to start");
await client.experimental.tasks.cancelTask(id);
const after = await client.experimental.tasks.getTask(id);
check(after.status === "cancelled", "tasks/cancel did not cancel", after);
await waitFor(() => !marked(`${mark}.2`), "the cancelled task's child to end");
seen.taskCancelled = id;

console.log(JSON.stringify(seen));
await client.close();
