// An MCP client (the official TypeScript SDK) uses cexec as its MCP server:
// a handful of face tools instead of every upstream tool definition.
import { call, connect, indent } from "../mcp.mjs";

const client = await connect("walkthrough-client");
const info = client.getServerVersion();
console.log(`connected to ${info.name} ${info.version}`);

const { tools } = await client.listTools();
console.log(`tools/list: ${tools.length} tools: ${tools.map((t) => t.name).join(", ")}`);
console.log(`tools/list size: ${JSON.stringify(tools).length} characters for all of them`);

console.log("\nsearch_tools (what the model calls first):");
console.log(indent(await call(client, "search_tools", { query: "list files in a directory", limit: 2, detail_level: "full" })));

console.log("\nexecute_code (one program, only its output comes back):");
const code = [
  "from servers.filesystem import list_directory",
  "files = list_directory(path='notes')['content'].splitlines()",
  "print(len(files), 'notes:', ', '.join(f.removeprefix('[FILE] ') for f in files))",
].join("\n");
console.log(indent(await call(client, "execute_code", { code })));

console.log("\ncall_tool (one call, its result as is):");
console.log(indent(await call(client, "call_tool", { server: "filesystem", tool: "read_text_file", arguments: { path: "hello.txt" } })));

const { resources } = await client.listResources();
const stub = resources.find((r) => r.uri.endsWith("/read_text_file.py"));
console.log(`\nresources: ${resources.length} stubs, e.g. ${stub.uri}`);

await client.close();
