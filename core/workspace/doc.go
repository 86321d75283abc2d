// Package workspace keeps what outlives one execution, per tenant: the
// workspace sandboxes mount at /workspace, state files, session logs with
// checkpoints, and skills. One tenant never sees another's data.
//
// # Layout
//
//	<data_dir>/images/<id>.img          the tenant's ext4 image (image mode)
//	<data_dir>/tenants/<id>/            0700, created on first use; the
//	                                    image's mount point in image mode
//	    tenant.json                     created and last-used times (for GC), uid; 0600
//	    state.lock                      flock of versioned saves (and of every save with
//	                                    a shared data_dir)
//	    workspace/                      mounted read-write at /workspace; 0700
//	        state/<name>.json|.yaml     state files, same bytes in and out
//	        skills/<name>/SKILL.md      the tenant's skills
//	        skills/<name>/__init__.py
//	    sessions/<session>.jsonl        session log, append-only, 0600
//	    sessions/<session>.meta.json    its summary, a cache
//	    vaults/<session>.json           PII vaults (core/guard/vault)
//	    audit/audit.jsonl               the tenant's audit log (core/audit), 0600
//
// Session logs sit outside the workspace so sandboxed code cannot read or
// forge them. With Options.TenantUIDs (cexecd as root) each tenant has a host
// uid of its own: the workspace and everything in it are that user's, the
// rest root's, so no other tenant's sandboxes (nor nobody) can reach it.
// The repository's skills/ folder is shared read-only and mounted at
// /cexec/skills.
//
// # Wiring
//
//	ws, err := workspace.New(workspace.Options{
//		DataDir: cfg.Daemon.DataDir, Tenants: cfg.Tenants,
//		SharedSkillsDir: "/path/to/repo/skills",
//	})
//	t, err := ws.Tenant("acme")          // validated id; folders created
//	if !t.Allowed("github") { ... }       // allowed_servers
//	run, err := t.Begin(sessionID)        // slot (max_concurrent), session
//	mounts := t.Mounts()                  // /workspace rw, /cexec/skills ro
//	... run the code; route host calls:
//	if workspace.HandlesMethod(method) {
//		return ws.HandleHostCall(ctx, "acme", run.Session(), method, params)
//	}
//	entry, err := run.Finish(workspace.Entry{Code: code, Result: &res})
//	// err wraps ErrQuotaExceeded when the tenant is at or over its quota;
//	// Begin refuses it then.
//
// The sandbox's module path must list /workspace before /cexec, so that
// `skills` is one namespace package and `from skills.<name> import ...`
// finds a tenant's skill before a shared one of the same name, as ListSkills
// and GetSkill report.
//
// # Decisions
//
//   - Tenant ids are [a-z0-9][a-z0-9_-]{0,63}; state names and session ids
//     [A-Za-z0-9][A-Za-z0-9._-]{0,127} without ".."; skill names lowercase
//     Python identifiers. All are single path components, and every file
//     access inside a workspace goes through os.Root, so a symlink planted by
//     sandboxed code cannot lead the daemon out of the tenant's folder.
//   - State is JSON or YAML. Pickle is refused by the host API because
//     loading a pickle runs code and the host would be the one loading it;
//     sandboxed code may still write any file under /workspace/state itself.
//     YAML is converted to and from JSON without losing key order or the
//     text of numbers.
//   - Writes of state and skills are atomic and durable (temporary file,
//     fsync, rename, fsync of the folder) and checked against the size limit
//     and the disk quota before anything is written. Writes that do not grow
//     the workspace always pass, so a tenant over quota can clean up.
//   - State saves can be versioned (LoadState, SaveStateIf; load_state and
//     save_state(..., version=) in programs): the version is a hash of the
//     stored bytes, so files sandboxed code writes have one too, and a
//     save with a stale version fails with ErrStateConflict (StateConflict
//     in Python) having written nothing. The compare and the write hold the
//     tenant's state.lock (flock), so replicas sharing DataDir
//     (Options.SharedDataDir, a postgres store) agree; with a shared
//     DataDir every save holds it. A shared DataDir excludes disk images
//     (each replica would mount the same image): quotas are measured.
//     Options.Slots counts max_concurrent over the replicas.
//   - Disk quotas hold at write time where cexecd can mount (root, loop
//     devices, e2fsprogs; Options.DiskImages): each tenant's whole folder is
//     the mount of its own ext4 image (package diskimage), sized so that
//     sandboxed code (an unprivileged user) gets the quota in bytes and
//     max_files in inodes, and cexecd (root) a reserve of 1/16 of the quota
//     (4-64 MiB) more, so an execution's log line still lands when the
//     program filled the rest. Everything the tenant stores counts, usage is
//     one statfs, and nothing is measured per execution; the image is
//     mounted when the tenant is first opened and unmounted (synced first)
//     by Close. A mount a crashed daemon left is reused; an image still
//     attached elsewhere (a sandbox of the last daemon that has not ended
//     yet keeps its file system) is waited for, up to 10 s, and then
//     refused, since a second file system on it would corrupt it. A
//     changed quota resizes the
//     image at the next open (offline: growing online needs
//     CAP_SYS_RESOURCE, and quotas only change with a restart), except below
//     what it stores. A folder from before images is copied into one (cp -a)
//     before the image takes its name, so a crash loses nothing; one that
//     does not fit stays measured.
//   - Measured (the fallback): disk usage is the sum of the apparent sizes
//     of the workspace's files. It is cached and updated by the host's own
//     writes. After executions of a tenant with a disk quota, a per-tenant
//     accountant measures it again in the background (debounced: a burst
//     costs at most two walks), never on the request path; its last figure
//     gates writes and refuses executions. Without a quota the figure is
//     dropped and measured when asked. The walk is iterative and
//     openat-based: linear in entries whatever the tree's depth.
//   - Either way an execution is refused before it starts while the tenant
//     is at or over its quota (bytes, or files in image mode), with an error
//     naming the quota; the execution entry that hit it records it
//     (Entry.Quota).
//   - Session log appends are one write(2) of one line with O_APPEND,
//     fsynced as Options.Sync says. A crash can leave only a torn
//     last line: readers skip and report it, the next append cuts it off.
//   - A tenant's own skill wins over a shared one of the same name, and
//     SaveSkill refuses to create such a clash (shared skills are
//     read-only; a clash only appears when a shared skill is added later).
//   - GC removes tenants unused for longer than a given age, never a
//     declared one or one with an execution running; the folder is renamed
//     away first, so a tenant is either all there or gone.
package workspace
