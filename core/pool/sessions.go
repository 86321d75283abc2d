package pool

import (
	"time"
)

// Want describes the execution a sandbox is acquired for, so that the pool
// can hand it the idle sandbox that suits it: a persistent session's
// interpreter lives in one sandbox, and the backend's runtime ends it
// (and empties the sandbox's scratch directories) when an execution of
// another session runs there.
type Want struct {
	Session    string
	Persistent bool
	// FreshGlobals: the persistent interpreter runs each execution in new
	// globals, so losing it loses nothing to warn about.
	FreshGlobals bool
}

// maxLost bounds the sessions remembered as having lost their persistent
// interpreter, for sessions that never come back.
const maxLost = 4096

// Why a session's persistent interpreter is gone, as its next persistent
// execution is told.
const (
	lostTaken    = "another session's execution needed its sandbox: the pool had no other one free, nor room for one"
	lostIdle     = "its sandbox was idle longer than the pool's idle_timeout and was stopped"
	lostUnfit    = "its sandbox was replaced after an execution left it unfit (a crash, a timeout, a cancellation)"
	lostMaxUses  = "its sandbox reached the pool's max_uses and was replaced"
	lostSick     = "its sandbox failed a health check and was replaced"
	lostEvicted  = "its sandbox was stopped to make room for another tenant"
	lostFlushed  = "the sandbox backend restarted"
	lostStopping = "the tenant's sandboxes were stopped"
	lostEnded    = "it ended during one of the session's executions (the program exited it, or it was killed)"
	lostClosed   = "its MCP session closed, which freed its sandbox, and another session's execution took it"
)

type lostSession struct {
	reason string
	at     time.Time
}

func sessionKey(tenant, session string) string { return tenant + "\x00" + session }

// claim is what claimLocked learnt for a persistent execution that keeps
// globals (Lease.Lost, Lease.Held).
type claim struct {
	lost string
	held bool
}

// claimLocked records that e now runs an execution of want: a session
// other than the one whose interpreter e holds ends that interpreter. For
// a persistent execution that keeps globals it returns why the session's
// interpreter is gone when the pool ended it earlier, or that e holds it.
func (p *Pool) claimLocked(e *entry, want Want) claim {
	held := want.Session != "" && e.holder == want.Session && e.keeps
	if e.holder != "" && e.holder != want.Session {
		why := lostTaken
		if e.released {
			why = lostClosed
		}
		p.lostLocked(e, why)
		e.holder, e.keeps = "", false
	}
	e.released = false
	switch {
	case want.Persistent:
		e.holder = want.Session
		e.keeps = e.keeps || !want.FreshGlobals
	case e.holder != want.Session:
		e.holder, e.keeps = "", false
	}
	if !want.Persistent || want.FreshGlobals {
		return claim{}
	}
	if held {
		return claim{held: true}
	}
	k := sessionKey(e.tenant, want.Session)
	l, ok := p.lost[k]
	if !ok {
		return claim{}
	}
	delete(p.lost, k)
	return claim{lost: l.reason}
}

// lostLocked remembers that the interpreter e holds is gone, and why, when
// it kept a session's globals.
func (p *Pool) lostLocked(e *entry, reason string) {
	if e.holder == "" || !e.keeps {
		return
	}
	if len(p.lost) >= maxLost {
		var oldest string
		var at time.Time
		for k, l := range p.lost {
			if oldest == "" || l.at.Before(at) {
				oldest, at = k, l.at
			}
		}
		delete(p.lost, oldest)
	}
	p.lost[sessionKey(e.tenant, e.holder)] = lostSession{reason: reason, at: time.Now()}
	e.holder, e.keeps, e.released = "", false, false
}

// pickIdleLocked chooses among tenant's idle sandboxes (most recently used
// last) the one for want, or -1 when a new sandbox should be created:
//   - the sandbox holding the session's interpreter;
//   - else one holding no interpreter (or one of a session that ended),
//     the most recently used (so that the others idle out), or the one
//     before it when that one ended an execution within settle;
//   - else the least recently used holding an interpreter with fresh
//     globals (ending it costs its session a new interpreter, less than a
//     new sandbox costs);
//   - else, while the pool has room, none: a new sandbox costs a start,
//     ending an interpreter that keeps globals costs a session its state;
//   - else the least recently used.
func (p *Pool) pickIdleLocked(es []*entry, want Want) int {
	if want.Session != "" {
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].holder == want.Session {
				return i
			}
		}
	}
	last, prev, stateless := -1, -1, -1
	for i := len(es) - 1; i >= 0; i-- {
		switch {
		case es[i].free() && last < 0:
			last = i
		case es[i].free() && prev < 0:
			prev = i
		case !es[i].free() && !es[i].keeps:
			stateless = i
		}
	}
	switch {
	case last >= 0 && prev >= 0 && es[last].uses > 0 && time.Since(es[last].lastUsed) < settle:
		return prev
	case last >= 0:
		return last
	case stateless >= 0:
		return stateless
	case len(es) == 0 || len(p.busy)+p.idleCountLocked()+p.creating < p.cfg.MaxTotal:
		return -1
	}
	return 0
}

// EndSession records that tenant's session ended (its MCP session
// closed): a sandbox holding its interpreter then serves other sessions
// as one holding none, rather than kept for it until idle_timeout, and the
// backend's runtime ends the interpreter when another session's execution
// runs there. Until then the session, continued from another connection
// (execute_code's session), still finds its globals; after, it is told
// why they are gone.
func (p *Pool) EndSession(tenant, session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	release := func(e *entry) {
		if e.tenant == tenant && e.holder == session {
			e.released = true
		}
	}
	for _, e := range p.idle[tenant] {
		release(e)
	}
	for _, e := range p.busy {
		release(e)
	}
}
