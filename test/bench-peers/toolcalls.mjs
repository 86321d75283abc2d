// Times sequential tool calls from a program to the reference memory
// server (test/peers' server-memory, over stdio) the way the in-process
// code-mode runtimes make them, against the same calls from a plain MCP
// client (the TypeScript SDK's): what each adds per call. cexec's own figure
// is `cexecctl bench tools` (call_overhead_ms, over a plain mcp-go client).
//
//   node toolcalls.mjs [calls per loop, default 1000] [rounds, default 2]
//
// It prints one JSON object: per round, each loop's milliseconds, and per
// runtime the mean of (loop - plain loop) / calls. UTCP code-mode's client
// logs every call on stdout; that is silenced while it runs (an MCP server
// on stdio would have to), so its figure leaves the logging out.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";

const calls = Number(process.argv[2] ?? 1000);
const rounds = Number(process.argv[3] ?? 2);
const here = path.dirname(fileURLToPath(import.meta.url));
const memory = path.join(here, "../peers/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
const dir = mkdtempSync(path.join(tmpdir(), "cexec-toolcalls-"));
const args = { query: "x" };

// server is the memory server's stdio command, each with a file of its own.
const server = (name) => ({ command: process.execPath, args: [memory], env: { MEMORY_FILE_PATH: path.join(dir, name + ".jsonl") } });

async function plainClient(name) {
  const c = new Client({ name: "cexec-bench-peers", version: "1" });
  await c.connect(new StdioClientTransport(server(name)));
  return c;
}

// Plain: the TypeScript SDK client, one call after the other.
const plain = await plainClient("plain");
const loops = {
  plain: async () => {
    for (let i = 0; i < calls; i++) await plain.callTool({ name: "search_nodes", arguments: args });
  },
};

// function: @cloudflare/codemode's README Node executor, the program an
// AsyncFunction given the tools as functions that call a client.
const fnClient = await plainClient("function");
const memoryTools = { search_nodes: (a) => fnClient.callTool({ name: "search_nodes", arguments: a }) };
const AsyncFunction = (async () => {}).constructor;
const program = `for (let i = 0; i < ${calls}; i++) await memory.search_nodes(${JSON.stringify(args)});`;
loops.function = () => new AsyncFunction("memory", program)(memoryTools);

// utcp: @utcp/code-mode with @utcp/mcp, the program in a new isolated-vm
// isolate, each call a synchronous bridge out to the client (node 22).
const quiet = async (f) => {
  const log = console.log;
  console.log = () => {};
  try {
    return await f();
  } finally {
    console.log = log;
  }
};
if (Number(process.versions.node.split(".")[0]) >= 22) {
  const { CodeModeUtcpClient } = await import("@utcp/code-mode");
  await import("@utcp/mcp");
  const utcp = await quiet(async () => {
    const u = await CodeModeUtcpClient.create();
    await u.registerManual({ name: "mem", call_template_type: "mcp", config: { mcpServers: { memory: { transport: "stdio", ...server("utcp") } } } });
    return u;
  });
  const code = `for (let i = 0; i < ${calls}; i++) mem.memory_search_nodes(${JSON.stringify(args)});`;
  loops.utcp = () =>
    quiet(async () => {
      const r = await utcp.callToolChain(code, 600000);
      if (r.logs.some((l) => l.startsWith("[ERROR]"))) throw new Error(r.logs.join("\n"));
    });
}

const names = Object.keys(loops);
// Warm every server's and client's JIT first, as cexec's figure does.
for (const n of names) await loops[n]();
const out = { calls, node: process.version, rounds: [], overhead_ms_per_call: {} };
for (let r = 0; r < rounds; r++) {
  const row = {};
  for (const n of r % 2 ? [...names].reverse() : names) {
    const t0 = performance.now();
    await loops[n]();
    row[n + "_ms"] = Math.round((performance.now() - t0) * 10) / 10;
  }
  out.rounds.push(row);
}
for (const n of names.filter((n) => n !== "plain")) {
  const per = out.rounds.map((row) => (row[n + "_ms"] - row.plain_ms) / calls);
  out.overhead_ms_per_call[n] = Math.round((per.reduce((a, b) => a + b, 0) / per.length) * 1000) / 1000;
}
process.stdout.write(JSON.stringify(out) + "\n");
rmSync(dir, { recursive: true, force: true });
process.exit(0);
