// Package vault replaces sensitive values with tokens such as [EMAIL_1]
// before text reaches the model, and puts the values back when the model's
// code or tool arguments come back with the tokens. The guard plugins only
// detect; the tokens and their values live here, in the host, one vault per
// (tenant, session), so a restarted plugin or daemon loses nothing.
//
// # Wiring
//
//	store, err := vault.NewStore(vault.Options{DataDir: cfg.Daemon.DataDir, Logger: log})
//	v, err := store.Open(tenant, session, detector) // detector: the guard aggregator
//	defer v.Close()
//	out, err := v.Tokenize(ctx, stdout)            // model-facing text
//	res, err := v.TokenizeJSON(ctx, result)        // execute_code's result, relayed tool results
//	code, err := v.UntokenizePython(agentCode)     // "write to [EMAIL_1]" works
//	args, err := v.UntokenizeJSON(callArgs)        // call_tool arguments from the sandbox
//
// A Tokenize error means the text must not be passed on: the detector
// failed, the vault is full or could not be saved.
//
// # Tokens
//
// A token is "[" TYPE "_" N "]": TYPE is the detector's type name in upper
// case (EMAIL, PHONE, US_SSN, CREDIT_CARD, IBAN, IP_ADDRESS, SECRET,
// PERSON, ...), N counts from 1 per type and session. The same value gets
// the same token for the whole session, compared after normalizing:
// emails and person names case-insensitively, phone, card and SSN numbers
// by their digits, IBANs without spaces in upper case, IP addresses in
// canonical form; other types exactly. A token restores the first spelling
// seen of its value.
//
// Text that merely looks like a token never gets confused with one. When
// Tokenize meets token-shaped text the vault did not issue, it leaves it
// and reserves it, so the vault never issues that token; when the text is
// a token the vault did issue, it is itself replaced by a [LITERAL_N]
// token. Untokenize only replaces tokens the vault issued. Together:
// Untokenize(Tokenize(s)) == s for every s, except that a value written
// two ways ("Alice@x.com", "alice@x.com") comes back in its first
// spelling.
//
// The session's own id is never tokenized, even when a detector flags it
// (a random id looks like a secret): the model holds it already and
// passes it back to continue the session.
//
// Overlapping spans (several guards may report one value differently) are
// merged, so no byte any guard flagged reaches the model. In JSON, every
// string is tokenized, object keys included, with one detector call per
// value; a number containing a detected value becomes a string.
//
// # Python source
//
// UntokenizePython lexes the agent's code and restores tokens only inside
// string literals, escaped for the literal they land in: `"to [EMAIL_1]"`
// becomes `"to alice@example.com"`, a value with quotes or backslashes
// gets them escaped, braces are doubled in f-strings, non-ASCII becomes
// \x escapes in bytes, and a raw literal holding a token is rewritten as
// the equivalent non-raw literal. Tokens in code or comments stay: they
// are not data there, and pasting a value into code would change the
// program. Limit: Python 3.11 forbids backslashes inside f-string
// expressions, so a value that needs escaping inside a string nested in
// an f-string's {...} only works on Python 3.12 and later.
//
// # Persistence
//
// Vaults live in DataDir/tenants/<tenant>/vaults/<session>.json (folder
// 0700, file 0600), outside the workspace sandboxes mount, so sandboxed
// code never sees real values it was not given. Every change is written
// before Tokenize returns, atomically (temporary file, fsync, rename,
// fsync of the folder): after a crash the vault is the old or the new one,
// never a mix, and a token the model has seen can always be restored.
// Vaults are not encrypted at rest: they rely on file permissions, like
// the rest of data_dir. One daemon owns a data_dir; two daemons writing
// the same vault would lose tokens.
//
// Replicas (a postgres store) set Options.Persister instead: vaults are
// then rows in PostgreSQL, encrypted with AES-256-GCM (core/store), written
// before Tokenize returns as files are, and a replica that learns another
// saved one (a change notification) calls Forget so its next Open reads
// it again. A session is served by one replica at a time (sticky routing),
// so two never write one vault at once.
//
// Nothing in this package logs a value or a token.
//
// # Sessions
//
// A token is restored only in the session that issued it: another
// session's vault does not know it, so there it stays as it is (and is
// reserved). Callers open the vault of the party that sees the text, not of
// whatever session a request names: the MCP face uses its MCP session's
// vault for everything it returns and every execution it runs, even when
// execute_code continues another session's log, so no session can restore,
// or read tokens into, another's vault.
package vault
