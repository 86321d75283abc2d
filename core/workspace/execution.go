package workspace

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// Execution is one execution's hold on its tenant: a concurrency slot, the
// session it belongs to and a snapshot of the state folder. Begin it before
// running code and Finish it after, whatever happened.
type Execution struct {
	t       *Tenant
	session string
	start   time.Time
	mark    uint64                // with a watched state folder
	before  map[string]stateStamp // without
	release func()
	once    sync.Once
}

// Begin starts an execution in session, or in a new session when session is
// "". It takes one of the tenant's slots and fails with
// ErrTooManyExecutions when none is free, or with ErrQuotaExceeded, naming
// the quota, when the tenant is over its disk quota. A tenant on its own
// file system image still runs at or over its quota, as long as cexecd's
// own writes fit: the image refuses the program's writes anyway, and a
// program is how it deletes files to get back under (Finish reports the
// quota meanwhile).
func (t *Tenant) Begin(session string) (*Execution, error) {
	if session == "" {
		session = NewSessionID()
	} else if err := ValidateSessionID(session); err != nil {
		return nil, err
	}
	if err := t.startable(); err != nil {
		return nil, err
	}
	release, err := t.Acquire()
	if err != nil {
		return nil, err
	}
	if t.mode == DiskModeImage {
		if err := t.createLog(session); err != nil {
			release()
			return nil, err
		}
	}
	x := &Execution{t: t, session: session, start: t.m.now(), release: release}
	if t.state != nil {
		x.mark = t.m.states.mark(t.state)
	} else {
		x.before = t.snapshotState()
	}
	return x, nil
}

// Session is the execution's session id.
func (x *Execution) Session() string { return x.session }

// Tenant is the execution's tenant.
func (x *Execution) Tenant() *Tenant { return x.t }

// Finish ends the execution: it releases the slot, logs e in the session as
// an execution entry (Duration and StateFiles filled in when empty: the
// state files sandboxed code or host calls added, changed or removed) and
// checks the disk quota against the accountant's last figure; releasing the
// slot asks a tenant with a quota to measure again in the background, as
// walking the workspace costs in proportion to its files, too much for
// every execution. So a workspace that went over quota shows at the end of
// a later execution; host writes (state, skills) are refused meanwhile. The entry is logged even when the
// workspace is over quota; the error then wraps ErrQuotaExceeded, for the
// agent to see. Only the first call does anything.
func (x *Execution) Finish(e Entry) (Entry, error) {
	first := false
	x.once.Do(func() { first = true })
	if !first {
		return Entry{}, fmt.Errorf("session %s: execution already finished: %w", x.session, pluginapi.ErrInvalidArgument)
	}
	x.release()
	e.Kind = KindExecution
	if e.Duration == 0 {
		e.Duration = Duration(x.t.m.now().Sub(x.start))
	}
	if e.StateFiles == nil {
		e.StateFiles = x.stateFiles()
	}
	qerr := x.t.nearQuota()
	if qerr != nil {
		e.Quota = qerr.Error()
	}
	logged, lerr := x.t.Append(x.session, e)
	return logged, errors.Join(lerr, qerr)
}

// stateFiles lists the state files added, changed or removed since Begin,
// by this execution or another of the tenant's running meanwhile. When
// changes may have gone unrecorded (the folder replaced, the event queue
// overflowed), every file the folder holds is listed.
func (x *Execution) stateFiles() []string {
	t := x.t
	if t.state == nil {
		return stateChanges(x.before, t.snapshotState())
	}
	names, complete := t.m.states.since(t.state, x.mark)
	if complete {
		return names
	}
	return t.stateNames()
}

// startable is overQuota for what an execution may start with: in image
// mode only a cornered image stops it.
func (t *Tenant) startable() error {
	if t.mode != DiskModeImage {
		return t.overQuota()
	}
	u, err := t.imageUse()
	if err != nil {
		return err
	}
	if !u.cornered {
		return nil
	}
	return t.quotaError(u)
}
