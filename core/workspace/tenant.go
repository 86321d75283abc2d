package workspace

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cexec/cexec/core/workspace/diskimage"
	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// touchEvery bounds how often a tenant's last-used time is written to
// tenant.json: GC works in days, so a minute of slack costs nothing and
// saves a file write per request.
const touchEvery = time.Minute

// Sandbox paths of a tenant's workspace and of the shared skills.
const (
	SandboxWorkspace    = "/workspace"
	SandboxSharedSkills = "/cexec/skills"
)

// Tenant is one tenant's workspace, state, sessions and skills. Get it from
// Manager.Tenant; it is safe for concurrent use. Every path it touches is
// inside the tenant's own folder, reached through an os.Root, so symlinks
// planted by sandboxed code cannot lead to another tenant or the host.
type Tenant struct {
	m        *Manager
	id       string
	dir      string // DataDir/tenants/<id>
	declared bool
	quota    atomic.Pointer[Quota] // swapped by Manager.SetTenants
	mode     string                // DiskModeImage or DiskModeMeasured
	root     *os.Root              // dir: tenant.json, the folders below
	ws       *os.Root              // dir/workspace
	// sessions is dir/sessions, kept open: every execution appends to a
	// log there, and a path through root opens the folder each time.
	sessions *os.Root
	// audit is dir/audit once an audit log was written (WithAuditDir),
	// kept open for the same reason. Guarded by auditMu.
	audit   *os.Root
	auditMu sync.Mutex
	// state records changes in the state folder (Manager.states), or is
	// nil.
	state *stateLog
	// owner is the host user of the workspace and of the tenant's
	// sandboxes, or nil for cexecd's own.
	owner *Owner
	// uid is the tenant's uid as tenant.json keeps it, or nil.
	uid *uint32

	// life is held shared by every file operation and exclusively by GC,
	// so a tenant is never removed under a write.
	life sync.RWMutex
	// wmu serialises workspace writes, so the quota check and the write
	// are one step.
	wmu sync.Mutex
	// reserved is what the last host write reserved in Options.Usage and
	// wrote has not settled yet. Guarded by wmu.
	reserved int64
	// sess serialises appends to one session log (striped by session id).
	sess [32]sync.Mutex
	// valid spares re-parsing state files whose content is known valid.
	valid *validatedFiles
	// pending is what SyncBatched's next pass fsyncs.
	pending pending
	// bg counts background removals, waited for before the roots close.
	bg sync.WaitGroup
	// acct counts the accountant (remeasure), waited for likewise.
	acct sync.WaitGroup

	mu      sync.Mutex
	running int
	gone    error // set when GC removed the tenant or the Manager closed
	// usage is the last measured size of the workspace plus the host's
	// writes since; it gates writes and reports quota errors, so the
	// request path never walks the workspace once it is known.
	usage        int64
	usageKnown   bool
	stale        bool  // the workspace may have changed since it was measured
	measuring    bool  // the accountant runs
	writes       int64 // host writes so far, to see one during a walk
	created      time.Time
	lastUsed     time.Time
	persistedUse time.Time
}

// ID is the tenant id.
func (t *Tenant) ID() string { return t.id }

// Declared reports whether cexec.hcl has a block for the tenant.
func (t *Tenant) Declared() bool { return t.declared }

// Quota returns the tenant's limits.
func (t *Tenant) Quota() Quota { return *t.quota.Load() }

// Owner is the host user the tenant's sandboxes run as and its workspace
// belongs to: its own with Options.TenantUIDs, else Options.Owner; nil
// means cexecd's own user.
func (t *Tenant) Owner() *Owner { return t.owner }

// DiskMode says how the disk quota holds: DiskModeImage or
// DiskModeMeasured.
func (t *Tenant) DiskMode() string { return t.mode }

// WorkspaceDir is the host folder mounted read-write at /workspace.
func (t *Tenant) WorkspaceDir() string { return filepath.Join(t.dir, "workspace") }

// Mounts returns what a sandbox of this tenant mounts: the workspace
// read-write at /workspace and, when configured, the shared skills
// read-only at /cexec/skills. The runtime makes `skills` one package over
// /workspace/skills then /cexec/skills, so that a tenant's skill wins over
// a shared one of the same name, as List and Get report.
func (t *Tenant) Mounts() []sandbox.Mount {
	ms := []sandbox.Mount{{Source: t.WorkspaceDir(), Target: SandboxWorkspace}}
	if d := t.m.opts.SharedSkillsDir; d != "" {
		ms = append(ms, sandbox.Mount{Source: d, Target: SandboxSharedSkills, ReadOnly: true})
	}
	return ms
}

// Allowed reports whether the tenant may call tools of the upstream server.
func (t *Tenant) Allowed(server string) bool {
	q := t.Quota()
	return q.AllowedServers == nil || slices.Contains(q.AllowedServers, server)
}

// Acquire takes one of the tenant's execution slots. It never waits: when
// MaxConcurrent executions already run it fails with ErrTooManyExecutions.
// Call release exactly once when the execution ends (later calls do
// nothing); GC never removes a tenant holding a slot.
func (t *Tenant) Acquire() (release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone != nil {
		return nil, fmt.Errorf("tenant %s: %w", t.id, t.gone)
	}
	if n := t.Quota().MaxConcurrent; n > 0 && t.running >= n {
		return nil, fmt.Errorf("tenant %s already runs %d of its %d allowed concurrent executions; retry when one finishes: %w",
			t.id, t.running, n, ErrTooManyExecutions)
	}
	t.running++
	t.touchLocked()
	shared := func() {}
	if n := t.Quota().MaxConcurrent; n > 0 && t.m.opts.Slots != nil {
		var err error
		if shared, err = t.sharedSlot(n); err != nil {
			t.running--
			return nil, err
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			shared()
			t.mu.Lock()
			defer t.mu.Unlock()
			t.running--
			t.remeasureLocked() // the sandbox may have written anything
			t.touchLocked()
		})
	}, nil
}

// Running is the number of executions holding a slot.
func (t *Tenant) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// LastUsed is the last time the tenant ran code or wrote state, skills or
// session entries.
func (t *Tenant) LastUsed() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastUsed
}

// DiskUsage is what the tenant stores in bytes: workspace, state, skills,
// session logs and vaults. In image mode it is the blocks in use of the
// tenant's file system, one statfs. Measured, it is the sum of apparent
// sizes (sparse and hard-linked files count in full): the accountant's
// last figure, kept up to date by the host's own writes. Only the first
// call walks the folder; after executions the accountant of a tenant with a
// quota measures it again in the background, and for one without, the next
// call walks.
func (t *Tenant) DiskUsage() (int64, error) {
	if err := t.enter(); err != nil {
		return 0, err
	}
	defer t.exit()
	if t.mode == DiskModeImage {
		u, err := diskimage.UsageOf(t.dir)
		return u.Bytes, err
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.usageLocked()
}

// CheckQuota walks the workspace now (sandboxed code may have written
// anything) and fails with ErrQuotaExceeded when it is over the disk quota.
// It returns the usage either way. Executions never call it: they read the
// accountant's last figure (overQuota).
func (t *Tenant) CheckQuota() (int64, error) {
	if err := t.enter(); err != nil {
		return 0, err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.mode == DiskModeImage {
		u, err := t.imageUse()
		return u.bytes, errors.Join(err, t.quotaError(u))
	}
	t.mu.Lock()
	t.usageKnown = false
	t.mu.Unlock()
	usage, err := t.usageLocked()
	if err != nil {
		return 0, fmt.Errorf("tenant %s: measure workspace: %w", t.id, err)
	}
	return usage, t.quotaError(diskUse{bytes: usage, files: -1})
}

// diskUse is what a tenant stores; files is -1 when unknown (measured).
type diskUse struct {
	bytes, files int64
	// full: nothing more fits for sandboxed code.
	full bool
	// near: so little is left that one large write already fails.
	near bool
	// cornered: cexecd's own writes are about to fail too (half its
	// reserve gone, or no inode left): nothing may start.
	cornered bool
}

// imageUse reads the usage of the tenant's image: one statfs.
func (t *Tenant) imageUse() (diskUse, error) {
	u, err := diskimage.UsageOf(t.dir)
	if err != nil {
		return diskUse{}, fmt.Errorf("tenant %s: %w", t.id, err)
	}
	// ext4 refuses a write a few blocks before the last (it keeps room for
	// the metadata of delayed allocations): within fullSlack is full.
	// One large write fails whole when less than a page-cache folio (up to
	// 2 MiB) is free: near says so.
	lim := t.Quota().limits()
	q := lim.Bytes
	return diskUse{bytes: u.Bytes, files: u.Files, full: u.FreeBytes < max(128<<10, q/256) || u.FreeFiles == 0,
		near: u.FreeBytes < min(2<<20, q/4), cornered: u.RootFreeBytes < lim.Reserve/2 || u.FreeFiles == 0}, nil
}

// nearQuota is overQuota, or in image mode a warning when so little is
// left that a large write fails: what an execution's end reports.
func (t *Tenant) nearQuota() error {
	if t.mode != DiskModeImage {
		return t.overQuota()
	}
	u, err := t.imageUse()
	if err != nil {
		return err
	}
	if qerr := t.quotaError(u); qerr != nil || !u.near {
		return qerr
	}
	return fmt.Errorf("tenant %q is at its disk quota: %s of %s used, %s free; larger writes fail with \"No space left on device\"; delete files under /workspace, state (cexecctl state rm) or skills: %w",
		t.id, bytesize.Format(u.bytes), bytesize.Format(t.Quota().DiskBytes), bytesize.Format(t.Quota().DiskBytes-u.bytes), ErrQuotaExceeded)
}

// overQuota checks the usage against the disk quota in O(1): in image
// mode one statfs, measured the last known figure. Executions are refused
// before they start while it fails.
func (t *Tenant) overQuota() error {
	if t.mode == DiskModeImage {
		u, err := t.imageUse()
		if err != nil {
			return err
		}
		return t.quotaError(u)
	}
	if u := t.sharedUsage(); u != nil {
		if t.Quota().DiskBytes <= 0 {
			return nil
		}
		usage, known, err := t.sharedFigure(u)
		if err != nil {
			// The database is out of reach (restarting, cut off): judge by
			// the figure last read, as a single cexecd does, so that a
			// brief outage does not stop cexecd's own records, workflow
			// journals among them (a run that cannot journal stops).
			t.m.log.Debug("disk quota checked against the last known usage", "tenant", t.id, "error", err)
			return t.lastQuotaError()
		}
		if !known {
			return nil
		}
		return t.quotaError(diskUse{bytes: usage, files: -1})
	}
	return t.lastQuotaError()
}

// lastQuotaError is the quota check against the last known usage; none
// known passes.
func (t *Tenant) lastQuotaError() error {
	t.mu.Lock()
	usage, known := t.usage, t.usageKnown
	t.mu.Unlock()
	if !known {
		return nil
	}
	return t.quotaError(diskUse{bytes: usage, files: -1})
}

func (t *Tenant) quotaError(u diskUse) error {
	q := t.Quota()
	if !u.full && (q.DiskBytes <= 0 || u.bytes < q.DiskBytes) && (q.MaxFiles <= 0 || u.files < q.MaxFiles) {
		return nil
	}
	files := ""
	if u.files >= 0 && q.MaxFiles > 0 {
		files = fmt.Sprintf(", %d of %d files", u.files, q.MaxFiles)
	}
	if u.cornered {
		// Not the host path: the error reaches the agent.
		return fmt.Errorf("tenant %q is over its disk quota: %s of %s used%s; no execution can start to delete files, as too little is left for cexecd's own records: "+
			"an operator must delete files in the tenant's workspace folder (or raise its disk_quota or max_files): %w",
			t.id, bytesize.Format(u.bytes), bytesize.Format(q.DiskBytes), files, ErrQuotaExceeded)
	}
	return fmt.Errorf("tenant %q is over its disk quota: %s of %s used%s; delete files under /workspace, state (cexecctl state rm) or skills to run again: %w",
		t.id, bytesize.Format(u.bytes), bytesize.Format(q.DiskBytes), files, ErrQuotaExceeded)
}

// remeasureLocked marks the usage stale and starts the accountant unless it
// runs; one that runs measures again when done, so a burst of executions
// costs at most two walks. Called with t.mu held.
func (t *Tenant) remeasureLocked() {
	if t.mode == DiskModeImage {
		return // statfs reads it when asked
	}
	if t.Quota().DiskBytes <= 0 {
		// Nothing waits for the figure of a tenant without a quota: forget
		// it rather than walk after every execution; DiskUsage (tenants
		// ls) walks when asked.
		t.usageKnown = false
		return
	}
	t.stale = true
	if t.measuring || t.gone != nil {
		return
	}
	t.measuring = true
	t.acct.Add(1)
	go t.account()
}

func (t *Tenant) remeasure() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remeasureLocked()
}

// account is the tenant's accountant: it walks the workspace off the
// request path until the figure is current. It gives way to GC (TryRLock)
// instead of holding it up; the figure then stays stale until the next
// execution.
func (t *Tenant) account() {
	defer t.acct.Done()
	for {
		// The old contents of replaced state files count until their
		// background removal is done (as in usageLocked); waited for
		// before the walk holds life, which GC may be waiting to take.
		t.bg.Wait()
		t.mu.Lock()
		if !t.stale || t.gone != nil || !t.life.TryRLock() {
			t.measuring = false
			t.mu.Unlock()
			return
		}
		t.stale = false
		writes := t.writes
		t.mu.Unlock()
		shared := t.sharedUsage()
		// The shared figure accounts for writes during the walk.
		u, err := t.measure(shared)
		t.life.RUnlock()
		t.mu.Lock()
		switch {
		case err != nil:
			t.m.log.Warn("measure workspace", "tenant", t.id, "error", err)
		case shared == nil && t.writes != writes:
			t.usage, t.usageKnown, t.stale = u, true, true // a host write raced the walk: once more
		default:
			t.usage, t.usageKnown = u, true
		}
		t.mu.Unlock()
	}
}

// measure walks the workspace, recording the figure in shared when the
// tenant's usage is shared with other replicas.
func (t *Tenant) measure(shared SharedUsage) (int64, error) {
	if shared != nil {
		return t.measureShared(shared)
	}
	return walkUsage(t.ws)
}

// usageLocked returns the known usage or, the first time, walks the
// workspace. Called with t.wmu held, so no host write changes the workspace
// meanwhile.
func (t *Tenant) usageLocked() (int64, error) {
	if t.mode == DiskModeImage {
		u, err := diskimage.UsageOf(t.dir)
		return u.Bytes, err
	}
	shared := t.sharedUsage()
	t.mu.Lock()
	if t.usageKnown {
		u := t.usage
		t.mu.Unlock()
		if shared != nil {
			// Other replicas' writes count too.
			if u, known, err := t.sharedFigure(shared); err != nil || known {
				return u, err
			}
		}
		return u, nil
	}
	t.mu.Unlock()
	t.bg.Wait() // old contents of replaced state files still count until removed
	u, err := t.measure(shared)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.usage, t.usageKnown = u, true
	if t.running > 0 {
		t.remeasureLocked() // a sandbox may still be writing
	}
	t.mu.Unlock()
	return u, nil
}

// reserve checks that replacing oldSize bytes with newSize keeps the
// workspace within its quota. Writes that do not grow it always pass, so a
// tenant over quota can still shrink. Called with t.wmu held.
func (t *Tenant) reserve(what string, oldSize, newSize int64) error {
	q := t.Quota().DiskBytes
	if q <= 0 || newSize <= oldSize {
		return nil
	}
	if u := t.sharedUsage(); u != nil {
		return t.reserveShared(u, what, oldSize, newSize, q)
	}
	usage, err := t.usageLocked()
	if err != nil {
		return fmt.Errorf("measure workspace: %w", err)
	}
	if after := usage - oldSize + newSize; after > q {
		return fmt.Errorf("tenant %s: writing %s (%s) would bring the workspace to %s, over its %s disk quota; nothing was written: %w",
			t.id, what, bytesize.Format(newSize), bytesize.Format(after), bytesize.Format(q), ErrQuotaExceeded)
	}
	return nil
}

// wrote records a finished host write in the usage cache and the tenant's
// activity. Called with t.wmu held.
func (t *Tenant) wrote(delta int64) {
	if u := t.sharedUsage(); u != nil {
		t.settleShared(u, delta)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.usageKnown {
		t.usage += delta
	}
	t.writes++
	t.touchLocked()
}

// touch records activity.
func (t *Tenant) touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touchLocked()
}

// touchLocked sets lastUsed and persists it at most every touchEvery; the
// write is not fsynced because a lost minute of activity does not matter.
func (t *Tenant) touchLocked() {
	now := t.m.now().UTC()
	t.lastUsed = now
	if t.gone != nil || now.Sub(t.persistedUse) < touchEvery {
		return
	}
	meta := tenantMeta{ID: t.id, Created: t.created, LastUsed: now, UID: t.uid}
	if err := writeAtomic(t.root, ".", tenantFile, mustJSON(meta), atomicWrite{}); err != nil {
		t.m.log.Warn("persist tenant last-used time", "tenant", t.id, "error", err)
		return
	}
	t.persistedUse = now
}

// enter starts a file operation: it fails once GC removed the tenant, and
// keeps GC out until exit.
func (t *Tenant) enter() error {
	t.life.RLock()
	t.mu.Lock()
	gone := t.gone
	t.mu.Unlock()
	if gone != nil {
		t.life.RUnlock()
		return fmt.Errorf("tenant %s: %w", t.id, gone)
	}
	return nil
}

func (t *Tenant) exit() { t.life.RUnlock() }

// sessionLock returns the append lock of a session.
func (t *Tenant) sessionLock(session string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(session))
	return &t.sess[h.Sum32()%uint32(len(t.sess))]
}

func (t *Tenant) closeRoots() error {
	t.bg.Wait()
	t.acct.Wait()
	if t.state != nil {
		t.m.states.unwatch(t.state)
	}
	var errs []error
	t.auditMu.Lock()
	audit := t.audit
	t.auditMu.Unlock()
	for _, r := range []*os.Root{t.ws, t.sessions, audit} {
		if r != nil {
			errs = append(errs, r.Close())
		}
	}
	if t.root != nil {
		errs = append(errs, t.root.Close())
	}
	return errors.Join(errs...)
}

func (t *Tenant) close() error {
	t.mu.Lock()
	t.gone = errManagerClosed
	t.mu.Unlock()
	return t.closeRoots()
}
