// A workflow's question with a secret field ("writeOnly": true), asked by
// the `workflow` tool, with the official TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in test/peers/package.json) over stdio
// through `cexecctl mcp`.
//
//  1. A client declaring form and URL elicitation: the plain field comes as
//     a form without the secret one; the secret one as a URL-mode
//     elicitation to cexecd's page, which the handler opens and POSTs the
//     secret to as a browser would, then accepts. The reply never holds the
//     secret.
//  2. A client declaring form mode only: nothing is asked, the run is left
//     waiting and the reply says to answer with cexecctl workflow signal.
//
// Environment: CEXECCTL, CEXECD_ADDRESS (required), CEXEC_TENANT, OUT, OUT2,
// SECRET. Prints one JSON line {answered: run, waiting: run}; exits 1 on the
// first failed check.
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";
import { ElicitRequestSchema } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js";

const env = process.env;
if (!env.CEXECCTL || !env.CEXECD_ADDRESS || !env.SECRET) {
  console.error("workflowsecret.mjs: set CEXECCTL, CEXECD_ADDRESS and SECRET");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`workflowsecret.mjs: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function connect(elicitation, handler) {
  const transport = new StdioClientTransport({ command: env.CEXECCTL, args: ["mcp"], env: { ...env }, stderr: "inherit" });
  const client = new Client({ name: "cexec-e2e-workflowsecret", version: "1.0.0" }, { capabilities: { elicitation } });
  client.setRequestHandler(ElicitRequestSchema, handler);
  await client.connect(transport);
  return client;
}

const start = (client, path) => client.callTool({ name: "workflow", arguments: {
  action: "start", name: "secret-note", input: { path } } }, undefined, { timeout: 120000 });

// 1. Form and URL mode.
const asked = [];
let page = "";
let c = await connect({ form: {}, url: {} }, async (req) => {
  asked.push(req.params);
  const p = req.params;
  if (p.mode === "url") {
    const get = await fetch(p.url);
    page = await get.text();
    check(get.ok && page.includes('type="password"') && page.includes('name="token"'), "the secret page", page);
    const post = await fetch(p.url, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: env.SECRET }).toString() });
    check(post.ok, "posting the secret", await post.text());
    const again = await fetch(p.url, { method: "POST", body: new URLSearchParams({ token: "again" }) });
    check(again.status === 404, "the page answered twice", again.status);
    return { action: "accept" };
  }
  check(p.requestedSchema?.properties?.label && !p.requestedSchema.properties.token, "the form holds the secret field", p);
  return { action: "accept", content: { label: "prod" } };
});
let r = await start(c, env.OUT);
check(!r.isError, "start failed", text(r));
check(asked.length === 2 && asked[0].mode !== "url" && asked[1].mode === "url" && asked[1].url.startsWith("http://127.0.0.1:"),
  "a form then a URL elicitation to a loopback page", asked);
check(!JSON.stringify(r).includes(env.SECRET), "the reply holds the secret", r);
check(text(r).includes("answered the question of ask"), "the reply does not say the question was answered", text(r));
const answered = r.structuredContent?.run;
await c.close();

// 2. Form mode only.
let formAsked = 0;
c = await connect({ form: {} }, async (req) => {
  formAsked++;
  return { action: "accept", content: { label: "dev" } };
});
r = await start(c, env.OUT2);
check(!r.isError, "second start failed", text(r));
check(formAsked === 0, "the plain field was asked though the secret one cannot be", formAsked);
check(r.structuredContent?.state === "waiting" && text(r).includes("cexecctl workflow signal"),
  "a client without URL mode does not leave the run waiting, said so", text(r));
await c.close();
console.log(JSON.stringify({ answered, waiting: r.structuredContent.run }));
