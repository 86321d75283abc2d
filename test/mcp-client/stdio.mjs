// End-to-end check of cexec's MCP face with the official TypeScript SDK
// client (@modelcontextprotocol/sdk, pinned in test/peers/package.json): it
// starts `cexecctl mcp` as an agent's MCP client would, over stdio, and walks
// the workflow the tool descriptions teach: list tools, search, read a stub
// (as a tool and as a resource), run a program that calls a real upstream
// tool, keep a program's globals for the next (persistent), and check a
// failing program's error.
//
// Environment:
//   CEXECCTL         path of the cexecctl binary (required)
//   CEXECD_ADDRESS   the daemon's control socket; the shim finds the MCP
//                    socket next to it (required)
//   CEXEC_TENANT     tenant to act as (optional)
//   MCP_E2E_SERVER   name of the upstream server-everything in cexec.hcl
//                    (default "everything")
//
// Prints one JSON line with what it saw; exits 1 with a message on the
// first check that fails.
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";

const server = process.env.MCP_E2E_SERVER || "everything";
const ctl = process.env.CEXECCTL;
if (!ctl || !process.env.CEXECD_ADDRESS) {
  console.error("stdio.mjs: set CEXECCTL and CEXECD_ADDRESS");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`stdio.mjs: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

const transport = new StdioClientTransport({
  command: ctl,
  args: ["mcp"],
  env: { ...process.env },
  stderr: "inherit",
});
const client = new Client({ name: "cexec-e2e-ts", version: "1.0.0" });
await client.connect(transport);
const seen = { server: client.getServerVersion() };

// 1. A handful of tools, each described.
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
for (const want of ["search_tools", "list_tools", "execute_code", "call_tool", "state", "skills"]) {
  check(names.includes(want), `tools/list lacks ${want}`, names);
}
check(tools.every((t) => t.description && t.inputSchema?.type === "object"), "a tool lacks a description or schema", tools);
seen.tools = names;

// 2. Search finds the upstream tool.
const search = await client.callTool({ name: "search_tools", arguments: { query: "sum of two numbers", detail_level: "full" } });
check(!search.isError && text(search).includes(".get_sum(*, a: float, b: float)"), "search_tools did not find get-sum", text(search));
seen.search = text(search).split("\n")[0];

// 3. Its stub, as a tool result and as a resource.
const stub = await client.callTool({ name: "list_tools", arguments: { server, tool: "get-sum" } });
check(!stub.isError && text(stub).includes("def get_sum("), "list_tools did not return the stub", text(stub));
const { resources } = await client.listResources();
const uri = resources.map((r) => r.uri).find((u) => u.endsWith("/get_sum.py"));
check(uri !== undefined, "resources/list lacks the get_sum stub", resources.map((r) => r.uri));
const read = await client.readResource({ uri });
check(read.contents[0].text.includes("def get_sum("), "reading the stub resource failed", read);
seen.stub = uri;

// 4. One program that calls the real upstream through the stub.
const code = `from servers.${server} import get_sum\nprint(get_sum(a=2, b=3))\n`;
const run = await client.callTool({ name: "execute_code", arguments: { code } });
check(!run.isError && /\b5\b/.test(text(run)), "execute_code did not print the sum", text(run));
check(run.structuredContent?.ok === true && run.structuredContent.tool_calls?.calls === 1,
  "execute_code's structuredContent does not show one tool call", run.structuredContent);
seen.execute = text(run).split("\n")[0];
seen.duration_ms = run.structuredContent.duration_ms;

// 4a. persistent: a program's globals stay for the session's next
// persistent program, and only for those.
const keep = await client.callTool({ name: "execute_code", arguments: { code: "kept = 5", persistent: true } });
check(!keep.isError, "a persistent program failed", text(keep));
const again = await client.callTool({ name: "execute_code", arguments: { code: "print(kept * 2)", persistent: true } });
check(!again.isError && text(again) === "10\n", "the next persistent program lacks the global", text(again));
const fresh = await client.callTool({ name: "execute_code", arguments: { code: "print('kept' in globals())" } });
check(!fresh.isError && text(fresh) === "False\n", "a program without persistent saw the global", text(fresh));
seen.persistent = text(again).trim();

// 4b. call_tool: one call, its result as is; arguments are checked.
const one = await client.callTool({ name: "call_tool", arguments: { server, tool: "get-sum", arguments: { a: 2, b: 3 } } });
check(!one.isError && /\b5\b/.test(text(one)) && !text(one).includes("[ok"), "call_tool did not return the sum as is", text(one));
const half = await client.callTool({ name: "call_tool", arguments: { server, tool: "get-sum", arguments: { a: 2 } } });
check(half.isError === true && /\bb\b/.test(text(half)), "call_tool without b was not an error naming it", text(half));
seen.call_tool = text(one);

// 5. A failing program is an isError result with its traceback.
const bad = await client.callTool({ name: "execute_code", arguments: { code: "1/0" } });
check(bad.isError === true && text(bad).includes("ZeroDivisionError") && text(bad).includes("Traceback"),
  "a failing program was not reported with its traceback", text(bad));

// 6. An unknown server is an actionable error.
const unknown = await client.callTool({ name: "list_tools", arguments: { server: "no-such-server", tool: "x" } });
check(unknown.isError === true && text(unknown).includes("known servers"), "unknown server error does not list the servers", text(unknown));

await client.close();
console.log(JSON.stringify(seen));
