// mcp.mjs: what the MCP examples share. They use the official TypeScript
// SDK client (@modelcontextprotocol/sdk, pinned in test/peers/package.json;
// `make deps` installs it) and reach cexecd the way an agent's MCP client
// does: by starting `cexecctl mcp`, which relays stdio to the daemon's MCP
// socket. CEXECCTL names the binary (run.sh sets it); CEXEC_SOCKET and
// CEXEC_TENANT are passed through to it.
import { Client } from "../../test/peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../../test/peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";

// connect opens one MCP session with cexecd.
export async function connect(name) {
  const transport = new StdioClientTransport({
    command: process.env.CEXECCTL || "cexecctl",
    args: ["mcp"],
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  return client;
}

// text joins a tool result's text content.
export function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

// call calls a face tool and returns its text, failing loudly on isError
// unless the caller expects one.
export async function call(client, name, args, { expectError = false } = {}) {
  const r = await client.callTool({ name, arguments: args });
  if (!!r.isError !== expectError) {
    throw new Error(`${name} ${expectError ? "succeeded" : "failed"}: ${text(r)}`);
  }
  return text(r);
}

// indent prefixes every line, for readable output.
export function indent(s, prefix = "    ") {
  return s.trimEnd().split("\n").map((l) => prefix + l).join("\n");
}
