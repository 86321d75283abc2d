// A sign-in link through URL elicitation, with the official TypeScript SDK
// client (@modelcontextprotocol/sdk, pinned in test/peers/package.json) over
// `cexecctl mcp`. The tenant has not signed in to the OAuth-protected
// server "sdk"; a program calls its greet tool.
//
// SIGNIN_MODE says what this client is and does:
//   accept   declares URL elicitation; "opens" the link by fetching it with
//            redirects followed (the demo authorization server approves
//            without a user and redirects to cexecd's loopback listener),
//            then accepts. Two concurrent calls of one program share the one
//            prompt, and both succeed in that execution.
//   decline  declares URL elicitation and declines: both calls of the
//            program get the SignInRequired ToolError, after one prompt.
//   formonly declares only form elicitation: no prompt, the ToolError.
//
// Environment: CEXECCTL, CEXECD_ADDRESS, CEXEC_TENANT, SIGNIN_MODE.
// Prints one JSON line with what it saw; exits 1 on the first failed check.
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js";

const ctl = process.env.CEXECCTL;
const mode = process.env.SIGNIN_MODE;
const tenant = process.env.CEXEC_TENANT;
if (!ctl || !process.env.CEXECD_ADDRESS || !tenant || !["accept", "decline", "formonly"].includes(mode)) {
  console.error("signin.mjs: set CEXECCTL, CEXECD_ADDRESS, CEXEC_TENANT and SIGNIN_MODE (accept, decline, formonly)");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`signin.mjs (${mode}): ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

const elicitation = mode === "formonly" ? { form: {} } : { form: {}, url: {} };
const transport = new StdioClientTransport({ command: ctl, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "cexec-e2e-signin", version: "1.0.0" }, { capabilities: { elicitation } });

const asked = [];
const completed = [];
const seen = { mode };
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  if (mode !== "accept") {
    return { action: "decline" };
  }
  // Open the link as a browser would: the authorization server redirects
  // to cexecd's loopback listener, which completes the sign-in.
  const resp = await fetch(req.params.url, { redirect: "follow" });
  seen.opened = { status: resp.status, body: (await resp.text()).trim() };
  return { action: "accept" };
});
client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
  completed.push(n.params.elicitationId);
});
await client.connect(transport);

const program = `import cexec
from concurrent.futures import ThreadPoolExecutor
def greet(n):
    try:
        return "OK " + str(cexec.call_tool("sdk", "greet", {"name": n}))
    except cexec.ToolError as e:
        return "TOOLERROR " + e.type + " " + str(e)
with ThreadPoolExecutor(2) as pool:
    for line in pool.map(greet, ["one", "two"]):
        print(line)`;
const r = await client.callTool({ name: "execute_code", arguments: { code: program } });
const out = (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
seen.out = out;

if (mode === "formonly") {
  check(asked.length === 0, "a client without URL mode was asked", asked);
} else {
  check(asked.length === 1, "want exactly one sign-in prompt for the execution", asked);
  const q = asked[0];
  check(q.mode === "url" && q.elicitationId && q.url, "the prompt is not a URL elicitation with url and elicitationId", q);
  const u = new URL(q.url);
  check(u.searchParams.get("code_challenge_method") === "S256" && u.searchParams.get("resource"),
    "the link is not an authorization request with PKCE and a resource", q.url);
  check(q.message.includes("sdk") && q.message.includes(tenant), "the prompt does not name the server and the tenant", q.message);
  check(!JSON.stringify(q).includes("access_token"), "the prompt carries a token", q);
  seen.message = q.message;
}
const lines = out.split("\n").filter((l) => l.startsWith("OK") || l.startsWith("TOOLERROR"));
check(lines.length === 2, "the program did not print two outcomes", out);
if (mode === "accept") {
  check(seen.opened?.status === 200, "the link did not end at cexecd's redirect listener", seen.opened);
  check(lines.every((l) => l.startsWith("OK") && l.includes("Hello")), "the calls did not succeed after the sign-in", out);
  check(completed.length === 1 && completed[0] === asked[0].elicitationId, "no elicitation/complete for the link", completed);
} else {
  const cmd = `cexecctl auth login sdk --tenant ${tenant}`;
  check(lines.every((l) => l.startsWith("TOOLERROR SignInRequired") && l.includes(cmd)), "want the SignInRequired ToolError naming " + cmd, out);
  if (mode === "decline") {
    check(lines.every((l) => l.includes("declined the sign-in link")), "the ToolError does not say the link was declined", out);
  }
}
await client.close();
console.log(JSON.stringify(seen));
