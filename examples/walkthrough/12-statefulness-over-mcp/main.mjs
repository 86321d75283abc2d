// What an agent keeps between MCP calls and between MCP sessions: state
// files, workspace files, skills and (within a session) PII tokens and the
// session log. Each connection is its own MCP session.
import { call, connect } from "../mcp.mjs";

// First session: save state with the state tool, and files from programs.
const a = await connect("walkthrough-agent-a");
console.log("session A: state tool saves", await call(a, "state", { name: "walkthrough-mcp.json", value: { step: 1, seen: ["apple"] } }));
const first = await call(a, "execute_code", {
  code: [
    "import cexec, os",
    "s = cexec.get_state('walkthrough-mcp.json')",
    "s['step'] += 1; s['seen'].append('banana')",
    "cexec.save_state('walkthrough-mcp.json', s)",
    "os.makedirs('/workspace/walkthrough', exist_ok=True)",
    "open('/workspace/walkthrough/mcp-note.txt', 'w').write('written in session A')",
    "print('program 1 updated state to step', s['step'])",
  ].join("\n"),
});
console.log("session A:", first.trim());
const second = await call(a, "execute_code", { code: "print('program 2 reads its workspace:', open('/workspace/walkthrough/mcp-note.txt').read())" });
console.log("session A:", second.trim());
await call(a, "skills", {
  name: "walkthrough_greet",
  description: "Greets by name",
  code: 'def greet(name: str) -> str:\n    """Say hello."""\n    return f"hello, {name}"\n',
});
console.log("session A: skills tool saved walkthrough_greet");
await a.close();

// Second session, a new connection: everything above is still there.
const b = await connect("walkthrough-agent-b");
console.log("session B: state tool reads", (await call(b, "state", { name: "walkthrough-mcp.json" })).trim());
const list = await call(b, "state", {});
console.log("session B: state list includes walkthrough-mcp.json:", list.includes("walkthrough-mcp.json"));
const third = await call(b, "execute_code", {
  code: [
    "from skills.walkthrough_greet import greet",
    "print(greet('session B'), '|', open('/workspace/walkthrough/mcp-note.txt').read())",
  ].join("\n"),
});
console.log("session B:", third.trim());
const skills = await call(b, "skills", {});
console.log("session B: skills list includes walkthrough_greet:", skills.includes("walkthrough_greet"));
await b.close();
