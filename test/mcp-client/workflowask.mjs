// The `workflow` tool asking the agent's user through elicitation, with the
// official TypeScript SDK client (@modelcontextprotocol/sdk, pinned in
// test/peers/package.json) over stdio through `cexecctl mcp`. The client
// declares form elicitation and answers in its own handler.
//
//  1. start fill-pdf-form: the run stops at its form-input listen, whose
//     question (missing city; plan, whose value is not one of its options,
//     with its options as SEP-1330 oneOf and its SEP-1034 default) reaches
//     the handler, which answers; then the approval question, approved. The
//     start call's reply is the run after the answers.
//  2. start it again and decline the question: the reply says the run still
//     waits and how to answer with signal.
//
// Environment: CEXECCTL, CEXECD_ADDRESS (required), CEXEC_TENANT, SOURCE
// (the applicant's JSON file), FORM, OUT, OUT2.
// Prints one JSON line {accepted: run, declined: run}; exits 1 on the first
// failed check.
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";
import { ElicitRequestSchema } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js";

const env = process.env;
if (!env.CEXECCTL || !env.CEXECD_ADDRESS || !env.SOURCE) {
  console.error("workflowask.mjs: set CEXECCTL, CEXECD_ADDRESS and SOURCE");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`workflowask.mjs: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

const transport = new StdioClientTransport({ command: env.CEXECCTL, args: ["mcp"], env: { ...env }, stderr: "inherit" });
const client = new Client({ name: "cexec-e2e-workflowask", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });

// answers are said, in order, to the elicitations that come; asked records
// every request.
let answers = [];
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  check(answers.length > 0, "an elicitation came when none was expected", req.params);
  return answers.shift();
});
await client.connect(transport);

const start = (out) => client.callTool({ name: "workflow", arguments: {
  action: "start", name: "fill-pdf-form", input: { source: env.SOURCE, form: env.FORM, out } } },
  undefined, { timeout: 120000 });

// 1. Both questions answered.
answers = [
  { action: "accept", content: { city: "Arlington", plan: "premium" } },
  { action: "accept", content: { approved: true, by: "alice" } },
];
let r = await start(env.OUT);
check(!r.isError, "start failed", text(r));
check(asked.length === 2, "the two questions did not reach the client", { asked, reply: text(r) });
const form = asked[0].requestedSchema;
check(asked[0].message.includes("form-input"), "the form question does not say what it waits for", asked[0]);
check(form?.properties?.city?.type === "string", "the form question does not ask for city", form);
const plan = form?.properties?.plan;
check(plan?.default === "standard", "plan has no SEP-1034 default", plan);
check(JSON.stringify(plan?.oneOf?.map((o) => o.const)) === JSON.stringify(["basic", "standard", "premium"]),
  "plan's options are not a SEP-1330 oneOf", plan);
check(JSON.stringify([...(form.required || [])].sort()) === JSON.stringify(["city", "plan"]), "required fields", form);
check(asked[1].message.includes("approval") && asked[1].requestedSchema?.properties?.approved?.type === "boolean",
  "the approval question", asked[1]);
const run1 = r.structuredContent?.run;
check(run1 && text(r).includes("answered the question of ask") && text(r).includes("answered the question of approve"),
  "the reply does not say what was answered", text(r));

// 2. Declined.
answers = [{ action: "decline" }];
r = await start(env.OUT2);
check(!r.isError, "second start failed", text(r));
check(asked.length === 3, "the second run's question did not reach the client", asked.length);
check(r.structuredContent?.state === "waiting" && text(r).includes("decline") && text(r).includes("still waits") &&
  text(r).includes("action signal"), "a declined question does not leave the run waiting, said so", text(r));

await client.close();
console.log(JSON.stringify({ accepted: run1, declined: r.structuredContent.run }));
