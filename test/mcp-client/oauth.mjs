// Remote sign-in to cexec's MCP face with the official TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in test/peers/package.json): its
// ClientCredentialsProvider gets the 401, reads the protected resource
// metadata (RFC 9728) the challenge points at, discovers the authorization
// server, gets an access token with the client_credentials grant for the
// face's URL (RFC 8707 resource) and retries; then it lists the tools and
// runs one.
//
// Environment (all required):
//   MCP_URL              the face's streamable HTTP endpoint (its audience)
//   OAUTH_ISSUER         the authorization server the credentials belong to
//   OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_SCOPE
//
// Prints "tools: <names>"; exits 1 with a message on failure.
import { Client } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StreamableHTTPClientTransport } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";
import { ClientCredentialsProvider } from "../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/client/auth-extensions.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`oauth.mjs: set ${name}`);
    process.exit(2);
  }
  return v;
};

const provider = new ClientCredentialsProvider({
  clientId: env("OAUTH_CLIENT_ID"),
  clientSecret: env("OAUTH_CLIENT_SECRET"),
  scope: env("OAUTH_SCOPE"),
  expectedIssuer: env("OAUTH_ISSUER"),
});
const transport = new StreamableHTTPClientTransport(new URL(env("MCP_URL")), { authProvider: provider });
const client = new Client({ name: "cexec-oauth-test", version: "1" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const res = await client.callTool({ name: "search_tools", arguments: { query: "echo" } });
  if (res.isError) {
    throw new Error("search_tools failed: " + JSON.stringify(res.content));
  }
  console.log("tools: " + tools.map((t) => t.name).join(" "));
  await transport.terminateSession();
  await client.close();
} catch (err) {
  console.error("oauth.mjs: " + (err && err.stack ? err.stack : err));
  process.exit(1);
}
