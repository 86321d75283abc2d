// Package auth signs cexecd in to OAuth-protected upstream MCP servers and
// keeps their tokens.
//
// A Manager gives each (server, tenant) an http.Client whose requests carry
// that tenant's access token for the server, refreshed when it expires; a
// 401 or a 403 insufficient_scope comes back as *SignInRequiredError, which
// says how to sign in. Login runs the authorization code flow with PKCE:
// protected resource metadata (RFC 9728) from the server's challenge or its
// well-known URLs, authorization server metadata (RFC 8414, OpenID
// discovery, or the 2025-03-26 default endpoints), a pre-registered client,
// a client ID metadata document or dynamic registration (RFC 7591), the
// resource indicator (RFC 8707) on every request, and a loopback redirect
// listener in cexecd, so tokens never leave the daemon. client_credentials
// servers get their tokens without a user. A client authenticates at the
// token endpoint with its secret (basic or post) or with a JWT signed by
// its key (private_key_jwt, RFC 7523).
//
// Tokens live in a Store: one AES-256-GCM encrypted file per (tenant,
// server) under data_dir/auth, outside every tenant's folder, so no sandbox
// can see them; the key is data_dir/auth/key (0600).
//
// mcp-go's OAuthHandler is not used for the flow: its discovery cannot fall
// back to root protected resource metadata (an explicitly set metadata URL
// must name the server's full URL), it keeps no scopes_supported, client ID
// metadata documents, client_credentials or step-up, and setting the
// authorization server's metadata URL drops the resource indicator. Its
// Token type and PKCE helpers are used.
package auth
