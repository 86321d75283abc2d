# cexec.hcl — the default configuration of cexecd.
#
# It runs on a fresh Linux machine with no API keys: code runs in bubblewrap
# sandboxes, tool search is lexical (BM25, no model), code generation for
# execute_task uses deterministic rules, and PII is detected locally.
#
# Start the daemon with it:   make build && bin/cexecd -config cexec.hcl
# Check it without starting:  bin/cexecd validate -config cexec.hcl
#
# Precedence, lowest first: built-in defaults, this file, CEXEC_* environment
# variables (CEXEC_DATA_DIR, CEXEC_SOCKET, CEXEC_LOG_LEVEL, CEXEC_PLUGIN_DIR,
# CEXEC_SANDBOX_BACKEND), then cexecd's command-line flags.
#
# Relative paths in this file are relative to the directory of this file.
#
# Secrets: write env("NAME") instead of a literal, e.g.
#   api_key = env("OPENAI_API_KEY")
# env("NAME", "fallback") gives a default when the variable is unset. Values
# from env() are never logged and show as "(sensitive)" in
# `cexecctl config show`; an upstream server that returns or prints one (of
# 8 characters or more), or a plugin that logs one, has it replaced by
# "(sensitive)" too.

# ---------------------------------------------------------------------------
# The daemon itself. Every attribute is optional.
cexec {
  # Tenant workspaces, session logs, the PII vault and caches.
  # Default: $XDG_DATA_HOME/cexec, else ~/.local/share/cexec.
  data_dir = "./.cexec"

  # trace, debug, info, warn or error. Logs go to stderr.
  log_level = "info"

  # The only directory plugin binaries are started from. A plugin's command
  # must resolve inside it: no "..", no absolute path or symlink leading out.
  # Default: the "bin" directory next to this file, where `make build` puts
  # the binaries.
  plugin_dir = "./bin"

  # How state files and session logs reach the disk. "batched": a saved
  # state file's content is fsynced before it replaces the old one (a save
  # is atomic and survives a crash of cexecd at once); folder entries and
  # session log lines are fsynced in the background every 200 ms, so a
  # power cut loses at most that much. "always": every write is fsynced
  # with its folder before it returns (about 1 ms more per write).
  sync = "batched"

  # Host users of tenants when cexecd runs as root: each tenant gets one uid
  # (gid the same number) of this inclusive range on first use, kept in its
  # tenant.json. Its sandboxes run as that user and its workspace is that
  # user's (0700); the folders above and the session logs stay root's. The
  # range must hold no host user's id (not 0, 65534 or 65535). Unset as
  # root: every tenant's sandboxes run as nobody, one shared user (a warning
  # says so). Not root: cexecd's own user throughout, and this is ignored.
  tenant_uids = "200000-265535"

  # Disk limits of every tenant whose block sets none, or that has no block:
  # no tenant can fill the file system that holds data_dir. Everything a
  # tenant stores counts: workspace, state, skills, session logs, PII
  # vaults. Run as root with loop devices and e2fsprogs (mkfs.ext4), cexecd
  # gives each tenant its own ext4 image of that size, mounted at
  # data_dir/tenants/<id> (images in data_dir/images, sparse): a write past
  # the quota fails in the program with "No space left on device", and a
  # few MiB more are kept for cexecd's own session log lines. Otherwise
  # quotas are measured after executions (one warning at start; `cexecctl
  # tenants ls` shows the mode). Either way a tenant at its quota is
  # refused new executions until it deletes files. A new tenant's own
  # folders already take some of it: disk_quota is at least "1MiB" and
  # max_files at least 64.
  disk_quota = "1GiB"
  max_files  = 131072 # files and folders

  # socket is left unset on purpose: cexecd then listens where cexecctl looks
  # by default, $XDG_RUNTIME_DIR/cexec/cexecd.sock or
  # /tmp/cexec-<uid>/cexecd.sock.
}

# ---------------------------------------------------------------------------
# Plugins: plugin "<kind>" "<name>" { ... }
#
# Kinds: sandbox, selector, codegen, guard. Only plugins named here are
# started. Attributes every plugin block accepts:
#   command  = "cexec-plugin-<kind>-<name>"  binary inside plugin_dir (default shown)
#   args     = []                            extra arguments
#   sha256   = "<64 hex digits>"             refuse to run a binary with another digest
#   required = true                          false: cexecd starts even if it fails to load
#   timeout  = "30s"                         start-up and per-call deadline (a
#                                            sandbox's Create, Destroy and Exec
#                                            have the backend's own limits)
#   env      = { NAME = "value" }            added to PATH, HOME, TMPDIR and LANG
#                                            from cexecd; nothing else is inherited
# Anything else in the block is the plugin's own configuration, checked
# against the schema the plugin declares, so mistakes point at a line here.
# Plugins run in this file's directory: relative paths in their blocks
# (rules_dir, cache_dir, ...) are relative to this file too.

# Runs Python in bubblewrap: every namespace unshared, no network, a
# read-only system, seccomp, memory/pids/time/output limits.
plugin "sandbox" "bwrap" {}

# Finds the few tools a task needs among all upstream tools. Offline by
# default (BM25 over names, descriptions and parameters); an
# OpenAI-compatible embeddings endpoint can be added in its own settings.
plugin "selector" "embeddings" {}

# Detects PII (emails, phone numbers, cards, IBANs, secrets, ...) so that the
# model sees tokens such as [EMAIL_1] instead of the values.
plugin "guard" "pii" {}

# Writes programs for execute_task from rule files, without an LLM. Add a
# plugin "codegen" "llm" block (and put it first in pipeline.codegen) to
# generate code with a model.
plugin "codegen" "rules" {}

# ---------------------------------------------------------------------------
# How execute_task turns a task into a program: search, generate, guard,
# run, repair. Names refer to the plugin blocks above.
pipeline {
  # The selector plugin (default: the only one configured).
  selector = "embeddings"

  # Generators, tried in order until one succeeds (default: all codegen
  # plugins in file order). A plugin a list here leaves out is started but
  # never called; a warning says so (likewise for guards).
  codegen = ["rules"]

  # Guards checking code, tool calls and output (default: all guard plugins).
  # With a sandbox, a config without any guard plugin is refused unless it
  # says guards = [] (which runs code with raw PII reaching the model and is
  # repeated as a warning at every start).
  guards = ["pii"]

  # Regenerations with the traceback after a program fails.
  max_repairs = 2

  # How many tools the selector hands to the generator.
  search_limit = 8
}

# ---------------------------------------------------------------------------
# Where and how sandboxed code runs.
sandbox {
  # The sandbox plugin (default: the only one configured).
  backend = "bwrap"

  # The interpreter is the sandbox plugin's setting: `python` in its plugin
  # block above (default /usr/bin/python3, resolved to a real path; pyenv
  # shims are refused).

  # Sandboxed code has no network unless this is true. Tool calls still
  # work: they go through cexecd, which holds the credentials. The bwrap
  # plugin must also allow it (allow_network = true in its block): either
  # side can keep the network off.
  network = false

  # By default every execution runs in a process forked for it and ended
  # after it: nothing of one execution reaches the next. With this true,
  # the executions of one session run in that session's own warm
  # interpreter instead, each in new globals, and the interpreter puts
  # back after each what the program changed (working directory,
  # environment, builtins, signal handlers and timers, standard streams,
  # sys hooks and settings, sys.path, modules imported from the workspace
  # or tool stubs); a program that leaves threads or open files, or adds
  # an audit hook, ends it. What stays is the standard library and
  # site-packages modules imported meanwhile, changes to them included.
  # No fork per execution: much less CPU, most of all on machines where
  # page faults are dear. Sessions never share an interpreter.
  session_interpreter = false

  # Warm sandboxes, per tenant, so an execution does not wait for a start.
  pool {
    warm          = 2     # kept ready
    max_total     = 16    # hard cap on sandboxes, busy and idle, of all tenants
    idle_timeout  = "5m"  # an unused sandbox is stopped after this
    max_uses      = 1000  # a sandbox is recycled after this many executions
    queue_timeout = "30s" # with all max_total busy, an execution waits this
                          # long for one (freed ones go first to the tenant
                          # holding the fewest), then gets a clear error
  }

  # Per-execution limits. Sizes need a unit: B, KB/MB/GB (powers of 1000) or
  # KiB/MiB/GiB (powers of 1024); durations take s, m, h ("1m30s").
  limits {
    memory  = "256MiB"
    pids    = 128
    timeout = "30s"   # wall-clock limit of one execution, at most 24h
    output  = "1MiB"  # stdout+stderr kept per execution; the rest is cut
    tmp     = "64MiB" # size of the sandbox's /tmp
    shm     = "64MiB" # size of its /dev/shm; both count towards memory
    # Largest file a program may write (RLIMIT_FSIZE); past it a write
    # fails with "File too large" (EFBIG).
    max_file_size = "256MiB"
    # Per tool call, so that one program cannot crash an upstream other
    # tenants share; an mcp_server block may set its own.
    max_argument_size = "1MiB"
    max_result_size   = "16MiB"
  }
}

# ---------------------------------------------------------------------------
# Upstream MCP servers. Their tools become Python modules under
# servers/<name>/ that sandboxed code imports and calls.
#
# Local servers run as child processes over stdio:
#   command, args, env (added to cexecd's PATH, HOME, TMPDIR and LANG;
#   nothing else is inherited), cwd
# Remote servers are reached over streamable HTTP or SSE:
#   url, headers (e.g. { Authorization = "Bearer ${env("TOKEN")}" })
# transport is inferred ("stdio" with command; "sse" for a URL ending in
# /sse; else "http") and can be set explicitly. timeout (default "60s")
# bounds each call, and each start of the server up to its first
# tools/list (at least 30s): raise it for a server slow to start. After a
# call times out the server is asked for its tools; one that answers nothing within the
# timeout (at most 10s) is wedged and is restarted.
# A stdio server must write only JSON-RPC messages on stdout; a line that
# is not one (a banner, a print, a broken answer) is skipped by the client,
# so an answer written that way is lost and its call times out. cexecd logs
# a warning quoting such lines (at most 10 at once, then one per 6s), counts
# them in servers ls and doctor, and names the last in the error of a call
# that timed out meanwhile (unless another tenant's calls were on the
# server then: their lines are not shown to this one).
# optional = true lets cexecd start when the server cannot be reached, with
# a warning. A command that is not found (looked up
# in the PATH the server gets) is an error of the file, shown with its line
# by cexecd validate; for an optional server, a warning. max_argument_size
# and max_result_size override sandbox.limits' caps of one tool call for
# this server.
#
# scope (default "shared") says who an instance serves. "shared": one
# process or session for every tenant, so whatever state the server keeps
# (files, a graph, a login) is common to all of them. "tenant": one
# instance per tenant (a process for stdio, a client session for HTTP/SSE),
# started by the tenant's first call, stopped after idle_timeout (default
# "10m") without calls, and at most max_instances (default 16) at once;
# beyond that the least recently used idle instance is stopped, and when
# none is idle the call fails with a clear error. The tools are listed once,
# by the default tenant's instance at start, and are the same for every
# tenant. A tenant-scoped server's args, env, cwd and headers may use
#   tenant.id   the tenant's id
#   tenant.dir  a folder of that tenant's for this server, created private
#               to cexecd: <data_dir>/tenants/<tenant>/servers/<server>
# and a tenant block may give a tenant its own env or headers (see Tenants
# below). A per-tenant instance is only private if its state is: point the
# server's state (a file path, a database name) at tenant.dir, or every
# instance reads and writes the same place and the tenants share it again.
#
# Both servers below need Node.js (npx); without it they are skipped, with
# a warning.

# Files under ./data, next to this file. `make run` creates it as a copy of
# examples/data; without it, the server is skipped until the folder exists.
mcp_server "filesystem" {
  command  = "npx"
  args     = ["-y", "@modelcontextprotocol/server-filesystem", "./data"]
  cwd      = "."
  optional = true
}

# A small knowledge graph that persists entities and relations. What one
# tenant stores there is its own: each tenant gets an instance whose graph
# lives in its own file (server-memory reads MEMORY_FILE_PATH; without it
# every instance would use the package's one default file).
mcp_server "memory" {
  command  = "npx"
  args     = ["-y", "@modelcontextprotocol/server-memory"]
  env      = { MEMORY_FILE_PATH = "${tenant.dir}/memory.jsonl" }
  scope    = "tenant"
  optional = true
}

# The forms server is built into cexecd (PDF AcroForms with pdfcpu, run in
# the daemon, never in a sandbox): pdf_fields, fill_pdf and read_pdf on files
# in the calling tenant's workspace. One in-process instance per tenant.
mcp_server "forms" {
  transport = "builtin"
}

# ---------------------------------------------------------------------------
# The MCP face agents connect to. It is always served on a private unix
# socket next to cexecd's socket, for `cexecctl mcp` (stdio). An mcp block
# also serves it over TCP: streamable HTTP on /mcp and SSE on /sse.
#
# mcp {
#   listen          = "127.0.0.1:7797"   # loopback only, unless tokens are set
#   allowed_origins = ["https://app.example.com"]  # browsers, besides localhost
#   tokens = [
#     { token = env("CEXEC_MCP_TOKEN_ACME"), tenant = "acme" },
#   ]
#   # Or sign-in at an identity provider: JWT access tokens for this URL.
#   oauth {
#     issuer       = "https://login.example.com/realms/cexec"
#     audience     = "https://mcp.example.com/mcp"   # this face's public URL
#     tenant_claim = "cexec_tenant"
#   }
# }

# ---------------------------------------------------------------------------
# Replicas: several cexecd sharing data_dir on one volume and a PostgreSQL
# database for MCP session leases, execution slots, PII vaults (encrypted
# with vault_key) and the skills registry. Disk images are then off (quotas
# measured). Put them behind deploy/haproxy/haproxy.cfg; see
# docs/SCALE-OUT.md. The default kind is "files": one cexecd.
#
# store {
#   kind      = "postgres"
#   dsn       = env("CEXEC_PG_DSN")
#   vault_key = env("CEXEC_VAULT_KEY")
# }
#
# and in the cexec block, optionally: replica = "a" (default: from the
# host name); it prefixes this replica's MCP session ids ("a.<id>").

# ---------------------------------------------------------------------------
# Tenants get separate workspaces, state, sessions and skills; a tenant
# block sets one tenant's quotas. Ids are 1-64 characters of a-z, 0-9, _
# and -. Example:
#
# tenant "acme" {
#   disk_quota      = "2GiB"          # all it stores; default: the cexec block's
#   max_files       = 200000          # its files and folders; default: the cexec block's
#   max_concurrent  = 4               # simultaneous executions
#   allowed_servers = ["filesystem"]  # upstream servers it may call (default: all)
#   policy {                        # see README.md, "PII tokens and policies"
#     strict         = true         # refuse when a guard plugin is down
#     max_tool_calls = 50           # per execution
#     deny           = ["filesystem/move_file"]
#     constraint "filesystem/write_file" {
#       argument = "path"
#       prefix   = "/srv/data/out/"
#     }
#   }
#   # This tenant's own env (stdio) or headers (HTTP/SSE) for a server with
#   # scope = "tenant", merged over the server's; only acme's instance gets
#   # them. They may use tenant.id, tenant.dir and env().
#   mcp_server "github" {
#     headers = { Authorization = "Bearer ${env("ACME_GITHUB_TOKEN")}" }
#   }
# }

# Prometheus metrics at /metrics (docs/OPERATIONS.md lists the series). Off
# without this block; with it, listen defaults to 127.0.0.1:9464.
# metrics {
#   listen = "127.0.0.1:9464"
# }

# Every tenant's audit log (executions, tool calls with argument hashes,
# policy denials) is always written; this block only sizes it.
# audit {
#   rotate_size = "16MiB"   # a file is rotated past this
#   keep        = 8         # rotated files kept
# }

# ---------------------------------------------------------------------------
# OpenTelemetry traces over OTLP (docs/TRACING.md): one trace per MCP request
# or execution. Off without this block. Unset attributes fall back to the
# OTEL_EXPORTER_OTLP_* variables.
#
# telemetry {
#   traces {
#     endpoint     = "127.0.0.1:4317"   # or a URL; loopback host:port is plain, others TLS
#     protocol     = "grpc"             # or "http"
#     sample_ratio = 1.0                # share of new traces kept
#     headers      = { "x-api-key" = env("OTEL_API_KEY") }
#   }
# }
