// The same pipeline as an agent reaches it: the execute_task face tool over
// MCP (the TypeScript SDK client through `cexecctl mcp`), with show_code.
import { call, connect, indent } from "../mcp.mjs";

const c = await connect("walkthrough-llm");
const reply = await call(c, "execute_task", {
  task_description: "count the words of a sentence and show the most common ones",
  show_code: true,
});
console.log("execute_task replied:");
console.log(indent(reply));
await c.close();
