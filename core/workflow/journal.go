package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Journals keep each run's journal in its tenant's data (core/workspace):
// one append-only file per run, every record on the disk (fsynced) before
// Append returns, and counted in the tenant's quota.
type Journals interface {
	// CreateRun starts a run's journal with its first record; the run
	// must not exist.
	CreateRun(tenant, run string, first []byte) error
	// AppendRun appends a record; with sync it is on the disk when
	// AppendRun returns.
	AppendRun(tenant, run string, record []byte, sync bool) error
	// ReadRun returns the journal's records in order; a torn last record
	// (a crash mid-append) is left out.
	ReadRun(tenant, run string) ([][]byte, error)
	ListRuns(tenant string) ([]string, error)
	// RunTenants lists the tenants that have runs.
	RunTenants() ([]string, error)
}

// RunHolder, when Journals implements it, holds a run for the one engine
// that executes it among processes sharing the journals (cexecd replicas
// on one data_dir): a run another process holds is running there, so it
// is neither resumed nor cancelled here. A process's holds end with it.
type RunHolder interface {
	// HoldRun takes run for this process until release; elsewhere is true
	// (and release nil) when another process holds it.
	HoldRun(tenant, run string) (release func(), elsewhere bool, err error)
}

// Record kinds.
const (
	KindRun     = "run"     // the run's first record: document, input
	KindStart   = "start"   // an effect began (call, run, wait)
	KindDone    = "done"    // a task finished: its output, the flow after it
	KindCaught  = "caught"  // a try's attempt failed and was caught
	KindWaiting = "waiting" // a listen waits for events
	KindSignal  = "signal"  // an event a listen received
	KindUnwait  = "unwait"  // a listen stopped waiting without a signal (its timeout, its branch cut)
	KindResume  = "resume"  // the run was resumed
	KindRerun   = "rerun"   // a task in flight at a crash is run again
	KindCancel  = "cancel"  // cancellation was asked
	KindEnd     = "end"     // the run ended: completed, failed or cancelled
)

// Record is one line of a run's journal.
type Record struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Path is the task's position in the run: its list, loop iteration,
	// attempt and visit, so that a resumed run finds each task's record.
	Path string `json:"path,omitempty"`
	Task string `json:"task,omitempty"`

	// KindRun.
	Name     string          `json:"name,omitempty"`
	File     string          `json:"file,omitempty"`
	Document string          `json:"document,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	// KindDone: the task's output and the $context after it.
	Output  json.RawMessage `json:"output,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
	Flow    string          `json:"flow,omitempty"`
	// KindCaught, KindEnd.
	Error *Error `json:"error,omitempty"`
	// KindWaiting: the event types; KindSignal: the one received.
	Events []string        `json:"events,omitempty"`
	Event  string          `json:"event,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	// Ask is a waiting listen's question (its metadata.ask, evaluated).
	Ask json.RawMessage `json:"ask,omitempty"`
	// KindEnd.
	Status string `json:"status,omitempty"`
	// KindStart of a wait: when it ends.
	Until *time.Time `json:"until,omitempty"`
}

// journal appends a run's records and holds what a resumed run replays.
type journal struct {
	store       Journals
	tenant, run string
	mu          sync.Mutex
	seq         int
	done        map[string]*Record // path → its done record
	caught      map[string]*Record // attempt path → its caught record
	started     map[string]*Record // path → its start record
	signals     map[string]*Record // listen path → its signal
	waiting     map[string]*Record // listen path → its waiting record
	records     []Record
	doneTasks   int
}

func newJournal(store Journals, tenant, run string) *journal {
	return &journal{store: store, tenant: tenant, run: run,
		done: map[string]*Record{}, caught: map[string]*Record{}, started: map[string]*Record{},
		signals: map[string]*Record{}, waiting: map[string]*Record{}}
}

// load replays a stored journal into the maps.
func (j *journal) load(lines [][]byte) error {
	for i, l := range lines {
		var r Record
		if err := json.Unmarshal(l, &r); err != nil {
			return fmt.Errorf("run %s: journal record %d: %w", j.run, i+1, err)
		}
		j.index(r)
	}
	return nil
}

func (j *journal) index(r Record) {
	j.seq = max(j.seq, r.Seq)
	j.records = append(j.records, r)
	rp := &r
	switch r.Kind {
	case KindDone:
		j.done[r.Path] = rp
		j.doneTasks++
	case KindCaught:
		j.caught[r.Path] = rp
	case KindStart:
		j.started[r.Path] = rp
	case KindSignal:
		j.signals[r.Path] = rp
	case KindWaiting:
		j.waiting[r.Path] = rp
	case KindUnwait:
		// Run again (a resumed failed run), the listen waits anew.
		delete(j.waiting, r.Path)
	}
}

// append writes a record; it is on the disk when append returns.
func (j *journal) append(r Record) (Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r.Seq = j.seq + 1
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return r, err
	}
	if r.Kind == KindRun {
		err = j.store.CreateRun(j.tenant, j.run, b)
	} else {
		// A start record only tells a resumed run that a task was in
		// flight; lost in a power cut, the task runs again all the same.
		err = j.store.AppendRun(j.tenant, j.run, b, r.Kind != KindStart && r.Kind != KindRerun)
	}
	if err != nil {
		return r, fmt.Errorf("journal run %s: %w", j.run, err)
	}
	j.index(r)
	return r, nil
}

func (j *journal) lookup(m map[string]*Record, path string) *Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := m[path]; r != nil {
		c := *r
		return &c
	}
	return nil
}

// hasUnder says whether any record's path starts with prefix.
func (j *journal) hasUnder(prefix string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for p := range j.done {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	for p := range j.started {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// snapshot copies the records.
func (j *journal) snapshot() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Record(nil), j.records...)
}
