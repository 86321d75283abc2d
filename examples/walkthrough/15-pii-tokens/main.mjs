// PII tokens round trip over MCP: what a program prints reaches the model
// with e-mail addresses and phone numbers replaced by tokens; a token the
// model writes back (in code or in call_tool arguments) is replaced by the
// real value before it reaches a tool, in the session that issued it.
import { call, connect } from "../mcp.mjs";

const a = await connect("walkthrough-pii");
// A contact card written by some earlier step. The program sees the real
// values; its printed output is tokenized on the way out.
const card = await call(a, "execute_code", {
  code: [
    "from servers.filesystem import create_directory, read_text_file, write_file",
    "create_directory(path='walkthrough')",
    "write_file(path='walkthrough/contact.txt', content='name: Jane Roe\\nemail: jane.roe@example.com\\nphone: +44 20 7946 0958\\n')",
    "print(read_text_file(path='walkthrough/contact.txt')['content'])",
  ].join("\n"),
});
console.log("1. the model reads the contact card:\n" + card.trim().split("\n").map((l) => "     " + l).join("\n"));
const email = card.match(/\[EMAIL_\d+\]/)?.[0];
const phone = card.match(/\[PHONE_\d+\]/)?.[0];
if (!email || !phone || card.includes("jane.roe@example.com")) {
  throw new Error("the output was not tokenized: " + card);
}

// The model uses the tokens as if they were the values.
const fwd = await call(a, "execute_code", {
  code: `from servers.filesystem import write_file\nwrite_file(path='walkthrough/forward.txt', content='send the report to ${email}')\nprint('wrote forward.txt')`,
});
console.log(`2. execute_code with ${email} in a string literal: ${fwd.trim()}`);
await call(a, "call_tool", { server: "filesystem", tool: "write_file", arguments: { path: "walkthrough/call-back.txt", content: `call ${phone}` } });
console.log(`3. call_tool with ${phone} in its arguments: wrote call-back.txt`);
const back = await call(a, "call_tool", { server: "filesystem", tool: "read_text_file", arguments: { path: "walkthrough/forward.txt" } });
console.log(`4. reading forward.txt back, the model sees: ${back.trim()}`);
await a.close();

// Another MCP session cannot use the first one's tokens: they stay text.
const b = await connect("walkthrough-pii-other");
await call(b, "call_tool", { server: "filesystem", tool: "write_file", arguments: { path: "walkthrough/other-session.txt", content: `send to ${email}` } });
console.log(`5. another session writing ${email}: left as the token`);
await b.close();
