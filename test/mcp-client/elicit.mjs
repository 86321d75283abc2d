// End-to-end check of elicitation through cexec with the official
// TypeScript SDK client (@modelcontextprotocol/sdk, pinned in
// test/peers/package.json): the client declares form elicitation and
// answers through its own handler, over stdio through `cexecctl mcp`.
//
//  1. A program calls server-everything's trigger-elicitation-request; the
//     upstream's question reaches this client, which answers it, and the
//     program prints the answer.
//  2. The same with a decline: the program gets a ToolError saying so.
//  3. A program calls memory/delete_entities, which the tenant's policy
//     wants approved (destructiveHint): this client approves through the
//     form cexec sends, with the arguments shown; the call runs.
//  4. The same, denied: the program gets a PermissionError.
//  5. server-everything's trigger-url-elicitation (offered only to clients
//     declaring URL mode, as cexec does): the URL reaches the client.
//
// Environment: CEXECCTL, CEXECD_ADDRESS (required), CEXEC_TENANT.
// Prints one JSON line with what it saw; exits 1 on the first failed check.
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";
import { ElicitRequestSchema } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js";

const ctl = process.env.CEXECCTL;
if (!ctl || !process.env.CEXECD_ADDRESS) {
  console.error("elicit.mjs: set CEXECCTL and CEXECD_ADDRESS");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`elicit.mjs: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

const transport = new StdioClientTransport({ command: ctl, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "cexec-e2e-elicit", version: "1.0.0" }, { capabilities: { elicitation: { form: {}, url: {} } } });

// answer is what the handler says to the next elicitation; asked records
// every request it got.
let answer = null;
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  check(answer !== null, "an elicitation came when none was expected", req.params);
  const a = answer;
  answer = null;
  return a;
});
await client.connect(transport);
const seen = {};

async function run(code) {
  const r = await client.callTool({ name: "execute_code", arguments: { code } });
  return { r, out: text(r) };
}

// 1. Relay, accepted.
answer = { action: "accept", content: { name: "Zorblax", check: true, integer: 7 } };
let { r, out } = await run(`import cexec
r = cexec.call_tool("everything", "trigger-elicitation-request", {})
print("ANSWER", r)`);
check(asked.length === 1, "the upstream's elicitation did not reach the client", { asked, out });
check(asked[0].message.startsWith("[MCP server everything]"), "the question does not say which server asks", asked[0]);
check(asked[0].requestedSchema?.properties?.integer, "the upstream's form schema was not relayed", asked[0]);
check(!r.isError && out.includes("ANSWER") && out.includes("Favorite Integer: 7"), "the program did not print the answer", out);
seen.relay = out.split("\n").find((l) => l.includes("Favorite Integer"));

// 2. Relay, declined.
answer = { action: "decline" };
({ r, out } = await run(`import cexec
try:
    cexec.call_tool("everything", "trigger-elicitation-request", {})
    print("NO ERROR")
except cexec.ToolError as e:
    print("TOOLERROR", e.type, e)`));
check(asked.length === 2, "the second elicitation did not reach the client", asked.length);
check(out.includes("TOOLERROR") && out.includes("declined"), "a decline did not reach the program as a ToolError", out);
seen.decline = out.trim();

// 3. Approval through the form, approved.
const create = `import cexec
cexec.call_tool("memory", "create_entities", {"entities": [{"name": "doomed", "entityType": "note", "observations": ["x"]}]})
`;
({ out } = await run(create));
check(asked.length === 2, "create_entities (not destructive) asked for approval", asked[2]);
answer = { action: "accept", content: { approve: true } };
({ r, out } = await run(`import cexec
r = cexec.call_tool("memory", "delete_entities", {"entityNames": ["doomed"]})
print("DELETED", r)`));
check(asked.length === 3, "delete_entities (destructiveHint) did not ask for approval", out);
const q = asked[2];
check(q.message.includes("delete_entities") && q.message.includes("memory") && q.message.includes("doomed"),
  "the approval question does not show server, tool and arguments", q);
check(q.requestedSchema?.properties?.approve?.type === "boolean", "the approval form has no boolean approve field", q);
check(!r.isError && out.includes("DELETED"), "the approved call did not run", out);
seen.approval_question = q.message;

// 4. Approval through the form, denied.
({ out } = await run(create));
answer = { action: "accept", content: { approve: false } };
({ r, out } = await run(`import cexec
try:
    cexec.call_tool("memory", "delete_entities", {"entityNames": ["doomed"]})
    print("NO ERROR")
except PermissionError as e:
    print("DENIED", e)`));
check(asked.length === 4, "the second delete did not ask", asked.length);
check(out.includes("DENIED") && out.includes("denied by the user"), "a denied call did not fail with PermissionError", out);
seen.denied = out.trim();

// 5. URL mode.
answer = { action: "accept" };
({ r, out } = await run(`import cexec
print(cexec.call_tool("everything", "trigger-url-elicitation", {"url": "https://example.com/consent", "message": "Sign the form"}))`));
check(asked.length === 5, "the URL elicitation did not reach the client", { out, asked: asked.length });
check(asked[4].mode === "url" && asked[4].url === "https://example.com/consent" && asked[4].elicitationId,
  "the URL elicitation's mode, url or id was not relayed", asked[4]);
check(!r.isError && out.includes("completed the URL elicitation flow"), "the program did not print the URL flow's outcome", out);
seen.url = asked[4].message;

await client.close();
console.log(JSON.stringify(seen));
