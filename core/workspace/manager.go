package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace/diskimage"
	"github.com/cexec/cexec/pluginapi"
)

// Defaults of Options.
const (
	DefaultMaxStateBytes = 10 << 20
	// DefaultMaxSessionLog bounds one session's log when the quota sets
	// no other bound: an agent's session is a few MiB at most, and a log
	// grown past this is a program filling it through checkpoint.
	DefaultMaxSessionLog = 64 << 20
	DefaultPython        = "/usr/bin/python3"
)

// Owner is a host user and group.
type Owner struct{ UID, GID int }

// Quota bounds one tenant. Zero values mean unlimited, except that in
// image mode a tenant without DiskBytes or MaxFiles gets
// config.DefaultDiskQuota and config.DefaultMaxFiles.
type Quota struct {
	// DiskBytes bounds everything the tenant stores: workspace, state,
	// skills, session logs and PII vaults.
	DiskBytes int64
	// MaxFiles bounds the tenant's files and folders; only image mode
	// enforces it.
	MaxFiles int64
	// MaxConcurrent bounds simultaneous executions.
	MaxConcurrent int
	// AllowedServers lists the upstream servers the tenant may call; nil
	// allows all of them.
	AllowedServers []string
	// MaxSessionLog bounds one session's log in bytes; 0 means
	// DefaultMaxSessionLog.
	MaxSessionLog int64
	// SessionTTL is how long a session outlives its last entry; 0 means
	// DefaultSessionTTL.
	SessionTTL time.Duration
}

// quotaOf is the quota of a tenant: its block's, with the disk limits it
// leaves out taken from Options.DefaultQuota.
func (m *Manager) quotaOf(d *config.Tenant) Quota {
	if d == nil {
		return m.opts.DefaultQuota
	}
	q := Quota{DiskBytes: d.DiskQuota, MaxFiles: int64(d.MaxFiles), MaxConcurrent: d.MaxConcurrent, AllowedServers: d.AllowedServers,
		MaxSessionLog: d.MaxSessionLog, SessionTTL: d.SessionTTL}
	if q.DiskBytes <= 0 {
		q.DiskBytes = m.opts.DefaultQuota.DiskBytes
	}
	if q.MaxFiles <= 0 {
		q.MaxFiles = m.opts.DefaultQuota.MaxFiles
	}
	return q
}

// maxSessionLog is the bound on one session's log.
func (q Quota) maxSessionLog() int64 {
	if q.MaxSessionLog > 0 {
		return q.MaxSessionLog
	}
	return DefaultMaxSessionLog
}

// Options configure a Manager.
type Options struct {
	// DataDir is cexecd's data_dir (absolute). Tenants live under
	// DataDir/tenants/<id>.
	DataDir string
	// Tenants are the tenant blocks of cexec.hcl. They set quotas, and GC
	// never removes a declared tenant.
	Tenants []*config.Tenant
	// DefaultQuota applies to tenants without a block; its DiskBytes and
	// MaxFiles also to blocks that set none.
	DefaultQuota Quota
	// DiskImages holds each tenant to its quota at write time: its folder
	// is the mount of an ext4 image of that size (package diskimage).
	// Without it, or when this process cannot mount images (not root, no
	// loop devices), quotas are measured after executions.
	DiskImages bool
	// SharedDataDir says other cexecd replicas use DataDir too (a shared
	// volume): every state write then holds the tenant's state lock across
	// processes. It excludes DiskImages, since two replicas mounting one
	// image would corrupt it; New refuses both.
	SharedDataDir bool
	// Slots, when set, holds max_concurrent across the replicas that share
	// DataDir: an execution takes a slot there besides this process's own
	// count. Nil counts in this process alone.
	Slots Slots
	// Usage, when set, keeps measured disk usage where every replica
	// sharing DataDir reads and updates it, so disk_quota holds for the
	// tenant's one folder, not per replica. Nil keeps it in this process.
	Usage SharedUsage
	// Skills, when set, is told of every saved skill.
	Skills SkillRegistry
	// DeclaredOnly refuses tenants without a block instead of creating them
	// on first use.
	DeclaredOnly bool
	// SharedSkillsDir is the repository's skills/ folder, mounted read-only
	// at /cexec/skills in sandboxes; "" means no shared skills.
	SharedSkillsDir string
	// SharedWorkflowsDir is the repository's workflows/ folder of shared,
	// read-only workflow documents; "" means none.
	SharedWorkflowsDir string
	// Python checks skill code (compile only, never run); default
	// /usr/bin/python3, symlinks resolved.
	Python string
	// MaxStateBytes bounds one state file; default 10 MiB.
	MaxStateBytes int64
	// Sync is how state writes and session log appends reach the disk;
	// default SyncBatched.
	Sync SyncPolicy
	// SyncInterval is the period of SyncBatched's background pass; default
	// DefaultSyncInterval.
	SyncInterval time.Duration
	// Owner, when set, is the host user sandboxed code runs as because it
	// is not cexecd's own (cexecd runs as root and the sandbox backend as an
	// unprivileged user). Workspace folders and the files cexecd writes in
	// them are handed to it, and the folders leading to a workspace become
	// 0711 (enter, not list) so it can reach its own; session logs stay
	// cexecd's. Nil leaves everything owned by cexecd, mode 0700.
	Owner *Owner
	// TenantUIDs, when set, gives each tenant a host user of its own (gid
	// the same number), allocated from this range on first use and kept
	// in tenant.json: sandboxes of the tenant run as it, and its workspace
	// folders and the files cexecd writes in them are its, mode 0700,
	// while the folders above them and sessions stay cexecd's, mode 0700.
	// Owner is then unused. Only when cexecd runs as root.
	TenantUIDs *config.IDRange
	// OnRemove is called with the id of each tenant GC removes, once its
	// folder is gone from view and before its files are deleted (the
	// daemon destroys its sandboxes and stops its server instances).
	OnRemove func(tenant string)
	// ExpireInterval is the period of the background sweep that removes
	// expired sessions (ExpireSessions); 0 means no sweep.
	ExpireInterval time.Duration
	// ExpireVault, when set, removes an expiring session's PII vault
	// before its log goes; an error keeps the session for the next sweep.
	ExpireVault func(tenant, session string) error
	// Logger receives warnings (repaired logs, GC); nil discards them.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now. Tests move it.
	Now func() time.Time
}

// OptionsFromConfig returns the Options a daemon with cfg uses: its data_dir,
// sync policy and tenant blocks, defaults for everything else.
func OptionsFromConfig(cfg *config.Config) Options {
	o := Options{DataDir: cfg.Daemon.DataDir, Tenants: cfg.Tenants, DiskImages: true,
		DefaultQuota: Quota{DiskBytes: cfg.Daemon.DiskQuota, MaxFiles: int64(cfg.Daemon.MaxFiles)}}
	if cfg.Daemon.Sync == "always" {
		o.Sync = SyncAlways
	}
	return o
}

// Manager owns the tenants under one data_dir. It is safe for concurrent
// use. Only one Manager (one cexecd) may use a data_dir at a time, unless
// Options.SharedDataDir says replicas share it: then state saves lock
// across processes, Options.Slots counts executions, and each session is
// served by one replica at a time (the per-session append locks live in
// memory).
type Manager struct {
	opts   Options
	dir    string // DataDir/tenants
	images bool   // tenants are image mounts (DiskModeImage)
	// declared holds the tenant blocks by id; SetTenants swaps it on a
	// config reload.
	declared atomic.Pointer[map[string]*config.Tenant]
	log      hclog.Logger
	now      func() time.Time
	// stopSync and syncDone stop SyncBatched's background pass.
	stopSync chan struct{}
	syncDone chan struct{}
	// stopExpire and expireDone stop the session expiry sweep.
	stopExpire chan struct{}
	expireDone chan struct{}

	// states tells which state files an execution changed; nil when
	// inotify is unavailable, and executions then list the folder before
	// and after.
	states *stateWatcher

	mu      sync.Mutex
	tenants map[string]*Tenant
	uids    uids
	closed  bool
}

// sharedTempAge is how old a temporary file must be before a replica on a
// shared data_dir takes it for a crash's leftover: no atomic write takes
// that long.
const sharedTempAge = 10 * time.Minute

// gcPrefix names a tenant folder being deleted by GC: it is renamed first so
// the tenant disappears atomically, then removed.
const gcPrefix = ".gc-"

// New checks opts and prepares DataDir/tenants (mode 0700). It removes what
// an interrupted GC left behind.
func New(opts Options) (*Manager, error) {
	if !filepath.IsAbs(opts.DataDir) {
		return nil, fmt.Errorf("workspace: data_dir %q is not absolute: %w", opts.DataDir, pluginapi.ErrInvalidArgument)
	}
	if opts.MaxStateBytes <= 0 {
		opts.MaxStateBytes = DefaultMaxStateBytes
	}
	if opts.Python == "" {
		opts.Python = DefaultPython
	}
	if opts.SharedSkillsDir != "" && !filepath.IsAbs(opts.SharedSkillsDir) {
		return nil, fmt.Errorf("workspace: shared skills folder %q is not absolute: %w", opts.SharedSkillsDir, pluginapi.ErrInvalidArgument)
	}
	if opts.SharedDataDir && opts.DiskImages {
		return nil, fmt.Errorf("workspace: disk images need one cexecd per data_dir (each replica would mount the same tenant image), and replicas share this one; set cexec.disk_images = false, quotas are then measured: %w", pluginapi.ErrInvalidArgument)
	}
	m := &Manager{
		opts:    opts,
		dir:     filepath.Join(opts.DataDir, "tenants"),
		log:     opts.Logger,
		now:     opts.Now,
		tenants: map[string]*Tenant{},
	}
	if m.log == nil {
		m.log = hclog.NewNullLogger()
	}
	if m.now == nil {
		m.now = time.Now
	}
	declared, err := declaredTenants(opts.Tenants)
	if err != nil {
		return nil, err
	}
	m.declared.Store(&declared)
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: create tenants folder: %w", err)
	}
	if err := os.Chmod(m.dir, m.dirMode()); err != nil {
		return nil, fmt.Errorf("workspace: tenants folder: %w", err)
	}
	names, err := readDirNames(m.dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: read tenants folder: %w", err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, gcPrefix) {
			if err := os.RemoveAll(filepath.Join(m.dir, n)); err != nil {
				m.log.Warn("remove leftover of an interrupted tenant gc", "dir", n, "error", err)
			}
		}
	}
	if opts.DiskImages {
		if err := m.prepareImages(); err != nil {
			m.log.Warn("disk quotas are measured after executions, not enforced at write time: tenant file system images are unavailable", "reason", err)
		} else {
			m.images = true
		}
	}
	if m.states, err = newStateWatcher(); err != nil {
		m.log.Warn("state changes are found by listing the state folder around each execution: inotify is unavailable", "error", err)
	}
	if opts.Sync == SyncBatched {
		interval := opts.SyncInterval
		if interval <= 0 {
			interval = DefaultSyncInterval
		}
		m.stopSync, m.syncDone = make(chan struct{}), make(chan struct{})
		go m.syncLoop(interval, m.stopSync, m.syncDone)
	}
	if opts.ExpireInterval > 0 {
		m.stopExpire, m.expireDone = make(chan struct{}), make(chan struct{})
		go m.expireLoop(opts.ExpireInterval, m.stopExpire, m.expireDone)
	}
	return m, nil
}

// Close flushes pending writes to disk, releases the open tenant folders
// and unmounts their images. The Manager is unusable after.
func (m *Manager) Close() error {
	if m.stopExpire != nil {
		close(m.stopExpire)
		<-m.expireDone
		m.stopExpire = nil
	}
	if m.stopSync != nil {
		close(m.stopSync)
		<-m.syncDone
		m.stopSync = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, t := range m.tenants {
		errs = append(errs, t.flush(), t.close())
		if t.mode == DiskModeImage {
			errs = append(errs, diskimage.Unmount(t.dir))
		}
	}
	m.tenants, m.closed = map[string]*Tenant{}, true
	if m.states != nil {
		errs = append(errs, m.states.close())
	}
	return errors.Join(errs...)
}

// Tenant returns the tenant with that id, creating its folders on first use:
// DataDir/tenants/<id>/ (0700) holding workspace/ (mounted at /workspace,
// with state/ and skills/), sessions/ and tenant.json. Handles are shared
// and cheap; get one per request.
func (m *Manager) Tenant(id string) (*Tenant, error) {
	if err := ValidateTenantID(id); err != nil {
		return nil, err
	}
	decl := m.decl(id)
	if decl == nil && m.opts.DeclaredOnly {
		return nil, fmt.Errorf("tenant %q is not configured: %w", id, pluginapi.ErrNotFound)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("tenant %s: %w", id, errManagerClosed)
	}
	if t := m.tenants[id]; t != nil {
		return t, nil
	}
	t, err := m.open(id, decl)
	if err != nil {
		return nil, fmt.Errorf("open tenant %s: %w", id, err)
	}
	m.tenants[id] = t
	return t, nil
}

// Lookup returns the tenant with that id when it exists: it has a folder
// (it was used) or a block in the config (opened then, as on first use).
// Unlike Tenant it creates no other tenant, so that a read naming a
// mistyped id leaves nothing behind; it answers ErrNoTenant instead.
func (m *Manager) Lookup(id string) (*Tenant, error) {
	if err := ValidateTenantID(id); err != nil {
		return nil, err
	}
	if m.decl(id) == nil && !m.Exists(id) {
		return nil, fmt.Errorf("no tenant %s: %w", id, ErrNoTenant)
	}
	return m.Tenant(id)
}

// open creates or opens a tenant's folders. Called with m.mu held.
func (m *Manager) open(id string, decl *config.Tenant) (*Tenant, error) {
	dir := filepath.Join(m.dir, id)
	quota, mode := m.quotaOf(decl), DiskModeMeasured
	if m.images {
		lim := quota.limits() // no tenant is uncapped
		quota.DiskBytes, quota.MaxFiles = lim.Bytes, lim.Files
		var err error
		if mode, err = m.attach(context.Background(), id, dir, quota); err != nil {
			return nil, fmt.Errorf("mount image: %w", err)
		}
	} else if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	t, err := m.openTenant(id, dir, decl, quota, mode)
	if err != nil && mode == DiskModeImage {
		_ = diskimage.Unmount(dir)
	}
	return t, err
}

// openTenant opens the tenant folder dir (an image's mount point in image
// mode): its tenant.json, a host uid for a tenant that has none yet, and
// its folders.
func (m *Manager) openTenant(id, dir string, decl *config.Tenant, quota Quota, mode string) (*Tenant, error) {
	if err := os.Chmod(dir, m.dirMode()); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	t := &Tenant{m: m, id: id, dir: dir, root: root, declared: decl != nil, mode: mode,
		valid: newValidatedFiles()}
	t.quota.Store(&quota)
	now := m.now().UTC()
	meta, err := readTenantMeta(root)
	fresh := err != nil
	if fresh {
		// First use, or a tenant.json lost to a crash: start the clock now.
		meta = tenantMeta{ID: id, Created: now, LastUsed: now}
	}
	allocated := false
	if m.opts.TenantUIDs != nil && meta.UID == nil {
		uid, err := m.allocateUID(id)
		if err != nil {
			root.Close()
			return nil, err
		}
		meta.UID, fresh, allocated = &uid, true, true
	}
	err = m.openFolders(t, meta, allocated)
	if err == nil && fresh {
		// Only once the workspace is the tenant's: a uid persisted before
		// would leave files of a failed hand-over with their old owner.
		err = writeAtomic(root, ".", tenantFile, mustJSON(meta), atomicWrite{})
		if err != nil {
			t.close()
		}
	}
	if err != nil {
		if allocated {
			m.releaseUID(id)
		}
		return nil, err
	}
	t.created, t.lastUsed, t.persistedUse = meta.Created, meta.LastUsed, meta.LastUsed
	return t, nil
}

// openFolders creates or opens the folders of t, whose tenant.json says
// meta, handing the workspace to the tenant's user. allocated means the
// tenant's uid is new: an existing workspace (of a tenant from before
// tenant_uids) is handed over whole. On error t is closed.
func (m *Manager) openFolders(t *Tenant, meta tenantMeta, allocated bool) error {
	root := t.root
	t.owner, t.uid = m.opts.Owner, meta.UID
	if meta.UID != nil && m.opts.TenantUIDs != nil {
		t.owner = &Owner{UID: int(*meta.UID), GID: int(*meta.UID)}
	}
	own := t.owner
	err := mkdirs(root, nil, sessionsDir)
	if err == nil {
		err = mkdirs(root, own, "workspace")
	}
	if err != nil {
		root.Close()
		return err
	}
	if t.sessions, err = root.OpenRoot(sessionsDir); err == nil {
		t.ws, err = root.OpenRoot("workspace")
	}
	if err == nil {
		err = mkdirs(t.ws, own, "state", "skills")
	}
	if err == nil && allocated {
		err = chownTree(t.ws, own)
	}
	if err != nil {
		t.close()
		return err
	}
	var cutoff time.Time
	if m.opts.SharedDataDir {
		cutoff = m.now().Add(-sharedTempAge)
	}
	for _, d := range []string{"state", "skills"} {
		removeTemps(t.ws, d, cutoff)
	}
	removeTemps(t.sessions, ".", cutoff)
	removeTemps(root, ".", cutoff)
	if m.states != nil {
		if t.state, err = m.states.watch(stateDirOf(t)); err != nil {
			m.log.Warn("state changes of this tenant are found by listing its state folder", "tenant", t.id, "error", err)
		}
	}
	return nil
}

const tenantFile = "tenant.json"

// tenantMeta is tenant.json, the persisted part of a tenant's activity.
type tenantMeta struct {
	ID       string    `json:"id"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	// UID is the tenant's host uid and gid, from Options.TenantUIDs.
	UID *uint32 `json:"uid,omitempty"`
}

func readTenantMeta(root *os.Root) (tenantMeta, error) {
	var meta tenantMeta
	data, err := readRegular(root, tenantFile, 1<<16)
	if err == nil {
		err = json.Unmarshal(data, &meta)
	}
	return meta, err
}

// TenantInfo describes a tenant for `cexecctl tenants ls`.
type TenantInfo struct {
	ID string
	// Declared tenants have a block in cexec.hcl; GC never removes them.
	Declared bool
	// Exists is false for a declared tenant that was never used.
	Exists    bool
	Created   time.Time
	LastUsed  time.Time
	DiskBytes int64
	Running   int
	Sessions  int
	Quota     Quota
	// DiskMode is DiskModeImage or DiskModeMeasured.
	DiskMode string
}

// Tenants lists declared tenants and those with a folder, sorted by id.
func (m *Manager) Tenants(ctx context.Context) ([]TenantInfo, error) {
	names, err := readDirNames(m.dir)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	ids := map[string]bool{}
	for _, n := range names {
		if ValidateTenantID(n) == nil {
			ids[n] = true
		}
	}
	for id := range *m.declared.Load() {
		ids[id] = true
	}
	var out []TenantInfo
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info := TenantInfo{ID: id, Declared: m.decl(id) != nil, Quota: m.quotaOf(m.decl(id)), DiskMode: DiskModeMeasured}
		if m.images {
			info.DiskMode = DiskModeImage
		}
		if !slices.Contains(names, id) {
			out = append(out, info)
			continue
		}
		info.Exists = true
		t := m.loaded(id)
		if t == nil && m.images {
			// Its usage and times are inside its image.
			if t, err = m.held(id); err != nil {
				return nil, fmt.Errorf("list tenants: %w", err)
			}
		}
		if t != nil {
			info.DiskMode = t.mode
			t.mu.Lock()
			info.Created, info.LastUsed, info.Running = t.created, t.lastUsed, t.running
			t.mu.Unlock()
			info.DiskBytes, _ = t.DiskUsage()
		} else {
			info.Created, info.LastUsed = m.storedUse(id)
			info.DiskBytes, _ = m.diskUsageOf(id)
		}
		if sn, err := readDirNames(filepath.Join(m.dir, id, "sessions")); err == nil {
			for _, n := range sn {
				if strings.HasSuffix(n, logSuffix) && !strings.HasPrefix(n, ".") {
					info.Sessions++
				}
			}
		}
		out = append(out, info)
	}
	return out, nil
}

func (m *Manager) loaded(id string) *Tenant {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tenants[id]
}

// held returns a tenant that has a folder, opening (mounting) it when it is
// not loaded, declared or not.
func (m *Manager) held(id string) (*Tenant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("tenant %s: %w", id, errManagerClosed)
	}
	if t := m.tenants[id]; t != nil {
		return t, nil
	}
	t, err := m.open(id, m.decl(id))
	if err != nil {
		return nil, fmt.Errorf("open tenant %s: %w", id, err)
	}
	m.tenants[id] = t
	return t, nil
}

// storedUse reads a tenant's persisted timestamps without opening it; the
// folder's modification time stands in when tenant.json is unreadable.
func (m *Manager) storedUse(id string) (created, lastUsed time.Time) {
	root, err := os.OpenRoot(filepath.Join(m.dir, id))
	if err == nil {
		defer root.Close()
		if meta, err := readTenantMeta(root); err == nil {
			return meta.Created, meta.LastUsed
		}
	}
	if st, err := os.Stat(filepath.Join(m.dir, id)); err == nil {
		return st.ModTime().UTC(), st.ModTime().UTC()
	}
	return time.Time{}, time.Time{}
}

// diskUsageOf measures a tenant folder: a walk, or in image mode one
// statfs.
func (m *Manager) diskUsageOf(id string) (int64, error) {
	dir := filepath.Join(m.dir, id)
	if ok, _ := diskimage.Mounted(m.imagePath(id), dir); ok {
		u, err := diskimage.UsageOf(dir)
		return u.Bytes, err
	}
	root, err := os.OpenRoot(filepath.Join(dir, "workspace"))
	if err != nil {
		return 0, err
	}
	defer root.Close()
	return walkUsage(root)
}

// GCEntry is a tenant GC removed (or would remove, in a dry run).
type GCEntry struct {
	ID        string
	LastUsed  time.Time
	DiskBytes int64
}

// GC removes tenants unused for longer than olderThan: their workspace,
// state, skills and sessions. It never removes a tenant declared in
// cexec.hcl, the default tenant (every command and MCP client without a
// tenant is it: its data is a user's, not a leftover) or one with an
// execution running. With dryRun it only reports.
func (m *Manager) GC(ctx context.Context, olderThan time.Duration, dryRun bool) ([]GCEntry, error) {
	if olderThan <= 0 {
		return nil, fmt.Errorf("tenant gc: the age must be positive, got %s: %w", olderThan, pluginapi.ErrInvalidArgument)
	}
	names, err := readDirNames(m.dir)
	if err != nil {
		return nil, fmt.Errorf("tenant gc: %w", err)
	}
	slices.Sort(names)
	var out []GCEntry
	for _, id := range names {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if ValidateTenantID(id) != nil || m.decl(id) != nil || id == endpoint.DefaultTenant {
			continue
		}
		if m.images {
			// Its last-used time is inside its image.
			if _, err := m.held(id); err != nil {
				return out, fmt.Errorf("tenant gc: %w", err)
			}
		}
		e, trash, err := m.collect(id, olderThan, dryRun)
		if err != nil {
			return out, fmt.Errorf("tenant gc: %s: %w", id, err)
		}
		if e == nil {
			continue
		}
		out = append(out, *e)
		if trash != "" {
			// Its sandboxes and server instances stop before its files
			// go, so none of them holds or writes the removed data.
			if m.opts.OnRemove != nil {
				m.opts.OnRemove(id)
			}
			// Outside the locks: the tenant is already gone from view.
			if err := os.RemoveAll(trash); err != nil {
				return out, fmt.Errorf("tenant gc: remove %s: %w", id, err)
			}
			m.forgetSharedUsage(ctx, id)
			m.log.Info("removed inactive tenant", "tenant", id, "last_used", e.LastUsed, "bytes", e.DiskBytes)
		}
	}
	return out, nil
}

// collect decides about one tenant and, unless dryRun, renames its folder
// out of the way (returned as trash). A nil entry means it stays.
func (m *Manager) collect(id string, olderThan time.Duration, dryRun bool) (*GCEntry, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cutoff := m.now().Add(-olderThan)
	t := m.tenants[id]
	var lastUsed time.Time
	if t != nil {
		// Waits for state writes and log appends in flight, and keeps new
		// ones out until the folder is gone.
		t.life.Lock()
		defer t.life.Unlock()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.running > 0 || t.measuring {
			return nil, "", nil
		}
		lastUsed = t.lastUsed
	} else {
		_, lastUsed = m.storedUse(id)
	}
	if !lastUsed.Before(cutoff) {
		return nil, "", nil
	}
	usage, err := m.diskUsageOf(id)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	e := &GCEntry{ID: id, LastUsed: lastUsed, DiskBytes: usage}
	if dryRun {
		return e, "", nil
	}
	dir := filepath.Join(m.dir, id)
	if t != nil && t.mode == DiskModeImage {
		// A mount point cannot be renamed: the image goes first, whole.
		t.gone = ErrTenantRemoved
		_ = t.closeRoots()
		delete(m.tenants, id)
		if err := diskimage.Unmount(dir); err != nil {
			return nil, "", err
		}
		if err := os.Remove(m.imagePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
	}
	trash := filepath.Join(m.dir, tempNameFor(gcPrefix, id))
	if err := os.Rename(dir, trash); err != nil {
		return nil, "", err
	}
	if t != nil && t.gone == nil {
		t.gone = ErrTenantRemoved
		_ = t.closeRoots()
		delete(m.tenants, id)
	}
	m.releaseUID(id)
	return e, trash, nil
}

// TenantUIDs is the range tenants' host users come from, or nil when
// tenants share one (Options.TenantUIDs).
func (m *Manager) TenantUIDs() *config.IDRange { return m.opts.TenantUIDs }

// dirMode is the mode of the tenants folder and of each tenant's folder:
// private, unless the one sandbox user all tenants share (Owner) must pass
// through them to its workspace. Tenant users never need to: a backend
// running as root reaches the workspace for them (bwrap's staging).
func (m *Manager) dirMode() os.FileMode {
	if m.opts.Owner != nil && m.opts.TenantUIDs == nil {
		return 0o711
	}
	return 0o700
}

func tempNameFor(prefix, name string) string {
	return prefix + strings.TrimPrefix(tempName(name), tempPrefix)
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("workspace: marshal %T: %v", v, err))
	}
	return b
}

// prepareImages checks that images can be mounted and creates the folder
// that holds them, removing what an interrupted creation left.
func (m *Manager) prepareImages() error {
	if err := diskimage.Supported(); err != nil {
		return err
	}
	dir := filepath.Join(m.opts.DataDir, imagesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create images folder: %w", err)
	}
	names, err := readDirNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, migratePrefix) || strings.HasSuffix(n, ".new") {
			p := filepath.Join(dir, n)
			_ = diskimage.Unmount(p)
			if err := os.RemoveAll(p); err != nil {
				m.log.Warn("remove leftover of an interrupted image creation", "file", n, "error", err)
			}
		}
	}
	return nil
}
