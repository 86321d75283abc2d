// An MCP server (stdio, the official TypeScript SDK) whose tools run a
// program in the in-process runtimes other code-mode projects use, so that
// `cexecctl bench mcp -- node server.mjs` times them with the same client
// and the same calls as cexec's execute_code:
//
//   pyodide        one Pyodide loaded at start; each program with fresh
//                  globals, as @pydantic/mcp-run-python runs it
//   pyodide_fresh  a new Pyodide for each program, as mcp-run-python 0.0.5
//                  loads one per call (without its package installs, which
//                  fetch from a CDN)
//   node_vm        JavaScript in a new node:vm context per program
//   function       JavaScript as the Node executor in @cloudflare/codemode's
//                  README runs it: an AsyncFunction in the server's own realm
//   utcp           JavaScript through @utcp/code-mode's callToolChain: a new
//                  isolated-vm isolate per program (node 22 and later only)
//
// None of them isolates a program from the host the way a sandbox does
// (isolated-vm keeps it from Node's APIs, in the server's process); they
// are here for their speed. Output is what the program printed.
import vm from "node:vm";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { loadPyodide } from "pyodide";

const decoder = new TextDecoder();

// runPython runs code in py with fresh globals and returns its stdout and
// stderr.
async function runPython(py, code) {
  let out = "";
  const write = { write: (buf) => { out += decoder.decode(buf); return buf.length; } };
  py.setStdout(write);
  py.setStderr(write);
  await py.runPythonAsync(code, { globals: py.toPy({ __name__: "__main__" }) });
  return out;
}

// capture is a console whose log and error append to a string.
function capture() {
  const c = { out: "" };
  c.log = c.error = (...args) => { c.out += args.map(String).join(" ") + "\n"; };
  return c;
}

const AsyncFunction = (async () => {}).constructor;

const warm = await loadPyodide();

// isolated-vm ships binaries for node 22 and later only, and node 20 dies
// rather than fail the import; the other tools run on 20.
let utcp = new Error("isolated-vm needs node 22 or later");
if (Number(process.versions.node.split(".")[0]) >= 22) {
  try {
    const { CodeModeUtcpClient } = await import("@utcp/code-mode");
    utcp = await CodeModeUtcpClient.create();
  } catch (err) {
    utcp = err;
  }
}

const tools = {
  pyodide: (code) => runPython(warm, code),
  pyodide_fresh: async (code) => runPython(await loadPyodide(), code),
  node_vm: async (code) => {
    const console = capture();
    await vm.runInNewContext(code, { console });
    return console.out;
  },
  function: async (code) => {
    const console = capture();
    await new AsyncFunction("console", `return await (${code})()`)(console);
    return console.out;
  },
  utcp: async (code) => {
    if (utcp instanceof Error) {
      throw new Error(`@utcp/code-mode did not load on node ${process.version}: ${utcp.message}`);
    }
    const { logs } = await utcp.callToolChain(code);
    return logs.map((l) => l + "\n").join("");
  },
};

const server = new Server({ name: "cexec-bench-peers", version: "1" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: Object.keys(tools).map((name) => ({
    name,
    description: `Run a program (${name.startsWith("pyodide") ? "Python" : "JavaScript"}); returns what it printed.`,
    inputSchema: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
  })),
}));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const run = tools[req.params.name];
  if (!run) {
    return { isError: true, content: [{ type: "text", text: `unknown tool ${req.params.name}` }] };
  }
  try {
    return { content: [{ type: "text", text: await run(String(req.params.arguments?.code ?? "")) }] };
  } catch (err) {
    return { isError: true, content: [{ type: "text", text: String(err) }] };
  }
});
await server.connect(new StdioServerTransport());
