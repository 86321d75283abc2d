// Progressive disclosure: the model starts from seven small tools and asks
// for more detail only about the tools it is going to use.
import { call, connect, indent } from "../mcp.mjs";

const c = await connect("walkthrough-disclosure");
const { tools } = await c.listTools();
const show = (label, s) => {
  console.log(`\n${label} (${s.length} characters):`);
  console.log(indent(s));
};
console.log(`tools/list: ${tools.length} face tools, ${JSON.stringify(tools).length} characters; no upstream tool definition in it`);

show("1. list_tools {} - the servers", await call(c, "list_tools", {}));
const query = "create entities in the knowledge graph";
show(`2. search_tools "${query}" at detail_level name`, await call(c, "search_tools", { query, detail_level: "name", limit: 3 }));
show("3. the same at detail_level description", await call(c, "search_tools", { query, detail_level: "description", limit: 3 }));
show("4. at detail_level full, only the one it will use", await call(c, "search_tools", { query, detail_level: "full", limit: 1 }));
const stub = await call(c, "list_tools", { server: "memory", tool: "create_entities" });
console.log(`\n5. list_tools memory/create_entities - the whole stub, if ever needed: ${stub.length} characters, starts "${stub.split("\n")[0]}"`);
const run = await call(c, "execute_code", {
  code: "from servers.memory import create_entities\nprint(create_entities(entities=[{'name': 'walkthrough-disclosure', 'entityType': 'example', 'observations': []}]) is not None)",
});
console.log(`6. execute_code with what step 4 said: ${run.trim()}`);
await c.close();
