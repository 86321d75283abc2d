// End-to-end check of rich content through cexec's MCP face with the official
// TypeScript SDK client (@modelcontextprotocol/sdk, pinned in
// test/peers/package.json), over stdio through `cexecctl mcp`:
//
//   1. one execute_code whose program calls server-everything's
//      get-tiny-image and shows the image: the reply carries it as MCP image
//      content; the same program reads a resource of server-everything;
//   2. a program shows a binary larger than the daemon's
//      max_inline_attachment: the reply carries a resource link, which
//      resources/read returns byte for byte;
//   3. call_tool of get-tiny-image returns image content;
//   4. another tenant cannot read the first tenant's saved attachment.
//
// Environment:
//   CEXECCTL         path of the cexecctl binary (required)
//   CEXECD_ADDRESS   the daemon's control socket (required)
//   CEXEC_TENANT     tenant of the first client (default "default")
//   OTHER_TENANT     tenant of the second client (required)
//   MCP_E2E_SERVER   name of the upstream server-everything (default "everything")
//   BIG_BYTES        size of the large binary (default 200000)
//
// Prints one JSON line with what it saw; exits 1 on the first failed check.
import { createHash } from "node:crypto";
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";

const server = process.env.MCP_E2E_SERVER || "everything";
const ctl = process.env.CEXECCTL;
const other = process.env.OTHER_TENANT;
const bigBytes = Number(process.env.BIG_BYTES || "200000");
if (!ctl || !process.env.CEXECD_ADDRESS || !other) {
  console.error("rich.mjs: set CEXECCTL, CEXECD_ADDRESS and OTHER_TENANT");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error(`rich.mjs: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail, null, 2)}`);
    process.exit(1);
  }
}

function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function connect(tenant) {
  const transport = new StdioClientTransport({
    command: ctl,
    args: ["mcp"],
    env: { ...process.env, CEXEC_TENANT: tenant },
    stderr: "inherit",
  });
  const client = new Client({ name: "cexec-e2e-rich", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

const client = await connect(process.env.CEXEC_TENANT || "default");
const seen = {};

// 1. The tiny image, from the upstream to the agent in one execute_code.
const code = `import cexec
from servers.${server} import get_tiny_image
items = get_tiny_image()
img = next(i for i in items if isinstance(i, cexec.Image))
print(type(img).__name__, img.mime_type, len(img.data), img.data[:4])
cexec.show(img)
doc = cexec.read_resource(${JSON.stringify(server)}, "demo://resource/dynamic/text/1")
print(type(doc).__name__, doc.mime_type, doc.text.split(":")[0])
`;
const run = await client.callTool({ name: "execute_code", arguments: { code } });
check(!run.isError, "execute_code failed", run);
check(/^Image image\/png \d+ b'\\x89PNG'/m.test(text(run)), "the program did not get an Image", text(run));
check(text(run).includes("Resource text/plain Resource 1"), "read_resource did not return the text resource", text(run));
const images = run.content.filter((c) => c.type === "image");
check(images.length === 1 && images[0].mimeType === "image/png", "execute_code's reply has no PNG image content", run.content);
const png = Buffer.from(images[0].data, "base64");
check(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), "the image is not a PNG", images[0].data.slice(0, 32));
check(run.structuredContent?.attachments?.[0]?.kind === "image", "structuredContent does not list the attachment", run.structuredContent);
seen.image = { mimeType: images[0].mimeType, bytes: png.length, text: text(run).split("\n")[0] };

// 2. A binary over the inline size arrives as a resource link the face serves.
const big = `import cexec, hashlib, os
data = os.urandom(${bigBytes})
with open("/workspace/blob.bin", "wb") as f:
    f.write(data)
path = cexec.show("/workspace/blob.bin")
print(hashlib.sha256(data).hexdigest(), path.startswith("/workspace/attachments/"))
`;
const bigRun = await client.callTool({ name: "execute_code", arguments: { code: big } });
check(!bigRun.isError, "the large show failed", bigRun);
const [digest, saved] = text(bigRun).split("\n")[0].split(" ");
check(saved === "True", "show did not return the saved path", text(bigRun));
const links = bigRun.content.filter((c) => c.type === "resource_link");
check(links.length === 1 && links[0].uri.startsWith("cexec://workspace/attachments/") && links[0].size === bigBytes,
  "the large binary did not come as a resource link", bigRun.content);
const got = await client.readResource({ uri: links[0].uri });
const blob = Buffer.from(got.contents[0].blob, "base64");
check(createHash("sha256").update(blob).digest("hex") === digest, "the linked resource is not the program's bytes", { bytes: blob.length });
seen.link = { uri: links[0].uri, bytes: blob.length };

// 3. call_tool returns the upstream's image as image content.
const one = await client.callTool({ name: "call_tool", arguments: { server, tool: "get-tiny-image" } });
check(!one.isError && one.content.some((c) => c.type === "image" && c.mimeType === "image/png"), "call_tool did not return the image", one.content);
seen.call_tool = one.content.map((c) => c.type);

// 4. Another tenant cannot read the first tenant's attachment.
const stranger = await connect(other);
let refused = "";
try {
  const leak = await stranger.readResource({ uri: links[0].uri });
  check(false, "another tenant read the attachment", { bytes: leak.contents?.[0]?.blob?.length });
} catch (e) {
  refused = String(e.message || e);
}
check(/no saved attachment/.test(refused), "another tenant's read failed for another reason", refused);
seen.other_tenant = refused;

await stranger.close();
await client.close();
console.log(JSON.stringify(seen));
