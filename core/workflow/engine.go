package workflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/core/workflow/jqworker"
	"github.com/cexec/cexec/pluginapi"
)

// Engine runs workflow documents. The embedded engine (Embedded) runs them
// inside cexecd with a journal in each tenant's data; a distributed engine
// (Temporal) can implement the same interface for the same documents.
type Engine interface {
	Start(ctx context.Context, req StartRequest) (Status, error)
	Status(ctx context.Context, tenant, run string) (Status, error)
	List(ctx context.Context, tenant string) ([]Status, error)
	Logs(ctx context.Context, tenant, run string) ([]Record, error)
	// Wait returns when the run ended, or ctx did.
	Wait(ctx context.Context, tenant, run string) (Status, error)
	Signal(ctx context.Context, tenant, run, event string, data json.RawMessage) error
	// Cancel stops a run. It returns once the run has ended, or sooner
	// (ctx, or the engine's own bound) with the cancel journaled and the
	// run cancelling.
	Cancel(ctx context.Context, tenant, run string) error
	// Resume continues a run that stopped (interrupted, or failed): its
	// finished tasks are not run again. A run whose cancel was journaled
	// before it stopped ends cancelled instead.
	Resume(ctx context.Context, tenant, run string) (Status, error)
}

// StartRequest starts a run of a loaded document.
type StartRequest struct {
	Tenant   string
	Document *dsl.Document
	Input    json.RawMessage
}

// Run states.
const (
	StateQueued      = "queued"
	StateRunning     = "running"
	StateWaiting     = "waiting" // a listen waits for a signal
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateCancelled   = "cancelled"
	StateInterrupted = "interrupted" // stopped with cexecd; resumes at its next start
	// StateCancelling: a cancel is journaled and the run has not ended yet;
	// it ends cancelled, at its next start if cexecd stops first.
	StateCancelling = "cancelling"
)

// Status is a run as its journal and the engine know it.
type Status struct {
	Run      string     `json:"run"`
	Tenant   string     `json:"tenant"`
	Workflow string     `json:"workflow"`
	State    string     `json:"state"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended,omitempty"`
	// Task is the task running now, or the last one that ran.
	Task      string          `json:"task,omitempty"`
	TasksDone int             `json:"tasks_done"`
	Waiting   []Pending       `json:"waiting,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     *Error          `json:"error,omitempty"`
}

// Pending is a listen waiting for one of its events.
type Pending struct {
	Path   string    `json:"path"`
	Task   string    `json:"task"`
	Events []string  `json:"events"`
	Since  time.Time `json:"since"`
	// Ask is the question the listen carries for a person (its
	// metadata.ask, evaluated when it began to wait): an MCP elicitation
	// requestedSchema. Empty when it carries none.
	Ask json.RawMessage `json:"ask,omitempty"`
}

// Options configure the embedded engine.
type Options struct {
	Journals Journals
	Effects  Effects
	// MaxConcurrent bounds the runs of one tenant that execute at once;
	// more wait, queued. Default 4.
	MaxConcurrent int
	// Limit, when set, is a tenant's own bound instead of MaxConcurrent.
	Limit func(tenant string) int
	// OnWaiting, when set, hears of each listen that starts waiting, so
	// that something (MCP elicitation) can ask for the answer and Signal
	// it. It must not block.
	OnWaiting func(tenant, run string, p Pending)
	// Forward, when set, hands a Signal or Cancel of a run that another
	// replica runs (RunHolder) to that replica, and returns its answer;
	// that replica applies it with Apply. Without it such a request fails.
	Forward func(ctx context.Context, f Forwarded) error
	// CancelWait is how long Cancel waits for the run to end before it
	// answers with the run cancelling; a forwarded cancel (Apply) may get
	// less, by its ctx. Default 3 s.
	CancelWait time.Duration
	Log        hclog.Logger
}

// Forwarded ops.
const (
	OpSignal = "signal"
	OpCancel = "cancel"
)

// Forwarded is a Signal (Op OpSignal, with Event and Data) or Cancel of a
// run that another replica runs.
type Forwarded struct {
	Tenant string
	Run    string
	Op     string
	Event  string
	Data   json.RawMessage
}

// Embedded is the engine inside cexecd. It is safe for concurrent use.
type Embedded struct {
	opts  Options
	jq    *jqworker.Pool
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	runs  map[string]*run // tenant/run → the runs in this process
	slots map[string]chan struct{}
	// stopped serializes Resume and the Cancel of a run not in this
	// process: between reading a stopped run's journal and launching (or
	// ending) it, another caller must not do the same, or one run would
	// execute twice at once.
	stopped sync.Mutex
}

var _ Engine = (*Embedded)(nil)

// NewEmbedded returns an engine; Close stops its runs (they resume at the
// next start, from their journals).
func NewEmbedded(opts Options) *Embedded {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 4
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = 3 * time.Second
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Embedded{opts: opts, jq: jqworker.NewPool(), ctx: ctx, stop: stop, runs: map[string]*run{}, slots: map[string]chan struct{}{}}
}

// Close stops every run where it is and waits for them, then the
// expression workers; the runs' journals keep what finished.
func (e *Embedded) Close() {
	e.stop()
	e.wg.Wait()
	e.jq.Close()
}

// NewRunID returns a new run id: sortable by time, unique.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func key(tenant, run string) string { return tenant + "/" + run }

// Start journals a new run and starts it; the workflow's input is checked
// against its input schema first.
func (e *Embedded) Start(ctx context.Context, req StartRequest) (Status, error) {
	input, err := decodeInput(req.Input)
	if err != nil {
		return Status{}, err
	}
	wf := req.Document.Workflow
	var sch schemas
	if wf.Input != nil {
		if err := sch.check(wf.Input.Schema, input, "the workflow's input"); err != nil {
			return Status{}, fmt.Errorf("%w: %w", err, pluginapi.ErrInvalidArgument)
		}
	}
	id := NewRunID()
	r := e.newRun(req.Tenant, id, req.Document, input)
	raw, _ := json.Marshal(input)
	if _, err := r.j.append(Record{Kind: KindRun, Name: req.Document.Name(), File: req.Document.File,
		Document: string(req.Document.Source), Input: raw}); err != nil {
		return Status{}, err
	}
	release, err := e.hold(req.Tenant, id)
	if err != nil {
		return Status{}, err
	}
	r.release = release
	e.launch(r)
	return r.status(), nil
}

func decodeInput(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("workflow input is not JSON: %v: %w", err, pluginapi.ErrInvalidArgument)
	}
	return v, nil
}

func (e *Embedded) newRun(tenant, id string, doc *dsl.Document, input any) *run {
	r := &run{e: e, tenant: tenant, id: id, doc: doc, input: input, j: newJournal(e.opts.Journals, tenant, id), x: exprs{jq: e.jq, tenant: tenant},
		state: StateQueued, done: make(chan struct{}), wake: make(chan struct{}), started: time.Now().UTC()}
	r.ctxVal = map[string]any{}
	return r
}

// launch runs r in the background, in one of its tenant's slots. A run
// gives its slot back while all its branches wait (listen, wait), so runs
// waiting for people do not hold up the tenant's others.
func (e *Embedded) launch(r *run) {
	ctx, cancel := context.WithCancel(e.ctx)
	r.cancel = cancel
	e.mu.Lock()
	e.runs[key(r.tenant, r.id)] = r
	slot := e.slots[r.tenant]
	if slot == nil {
		n := e.opts.MaxConcurrent
		if e.opts.Limit != nil {
			n = max(1, e.opts.Limit(r.tenant))
		}
		slot = make(chan struct{}, n)
		e.slots[r.tenant] = slot
	}
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		// An ended run is read from its journal from now on.
		defer e.forget(r)
		if r.release != nil {
			defer r.release()
		}
		defer cancel()
		defer close(r.done)
		r.slot = slot
		if err := r.busy(ctx, 1); err != nil {
			r.finish(nil, err)
			return
		}
		defer r.releaseSlot()
		r.setState(StateRunning)
		out, err := r.execute(ctx)
		r.finish(out, err)
	}()
}

// hold takes the run for this engine when the journals are shared
// (RunHolder); it fails wrapping ErrState and errElsewhere when another
// replica runs it. release is nil without a RunHolder.
func (e *Embedded) hold(tenant, id string) (release func(), err error) {
	h, ok := e.opts.Journals.(RunHolder)
	if !ok {
		return nil, nil
	}
	release, elsewhere, err := h.HoldRun(tenant, id)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	if elsewhere {
		return nil, fmt.Errorf("run %s: %w: %w", id, errElsewhere, ErrState)
	}
	return release, nil
}

// heldElsewhere reports whether another replica runs the run.
func (e *Embedded) heldElsewhere(tenant, id string) bool {
	release, err := e.hold(tenant, id)
	if release != nil {
		release()
	}
	return errors.Is(err, errElsewhere)
}

func (e *Embedded) forget(r *run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs[key(r.tenant, r.id)] == r {
		delete(e.runs, key(r.tenant, r.id))
	}
}

func (e *Embedded) live(tenant, run string) *run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key(tenant, run)]
}

// load reads a run's journal.
func (e *Embedded) load(tenant, id string) (*journal, error) {
	lines, err := e.opts.Journals.ReadRun(tenant, id)
	if err != nil {
		return nil, err
	}
	j := newJournal(e.opts.Journals, tenant, id)
	if err := j.load(lines); err != nil {
		return nil, err
	}
	if len(j.records) == 0 || j.records[0].Kind != KindRun {
		return nil, fmt.Errorf("run %s: the journal does not start with the run: %w", id, pluginapi.ErrNotFound)
	}
	return j, nil
}

func (e *Embedded) Status(ctx context.Context, tenant, id string) (Status, error) {
	if r := e.live(tenant, id); r != nil {
		return r.status(), nil
	}
	j, err := e.load(tenant, id)
	if err != nil {
		return Status{}, err
	}
	st := statusOf(tenant, id, j.snapshot(), "")
	if st.State == StateInterrupted && e.heldElsewhere(tenant, id) {
		st.State = StateRunning
		if len(st.Waiting) > 0 {
			st.State = StateWaiting
		}
	}
	return st, nil
}

func (e *Embedded) List(ctx context.Context, tenant string) ([]Status, error) {
	ids, err := e.opts.Journals.ListRuns(tenant)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(ids))
	for _, id := range ids {
		st, err := e.Status(ctx, tenant, id)
		if err != nil {
			e.opts.Log.Warn("read workflow run", "tenant", tenant, "run", id, "error", err)
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func (e *Embedded) Logs(ctx context.Context, tenant, id string) ([]Record, error) {
	if r := e.live(tenant, id); r != nil {
		return r.j.snapshot(), nil
	}
	j, err := e.load(tenant, id)
	if err != nil {
		return nil, err
	}
	return j.snapshot(), nil
}

func (e *Embedded) Wait(ctx context.Context, tenant, id string) (Status, error) {
	if r := e.live(tenant, id); r != nil {
		select {
		case <-r.done:
		case <-ctx.Done():
			return r.status(), ctx.Err()
		}
	}
	return e.Status(ctx, tenant, id)
}

// Signal hands an event to a run's waiting listen; it is journaled before
// Signal returns. A run that waits for no such event is an error naming
// what it waits for.
func (e *Embedded) Signal(ctx context.Context, tenant, id, event string, data json.RawMessage) error {
	r := e.live(tenant, id)
	if r == nil {
		if _, err := e.load(tenant, id); err != nil {
			return err
		}
		if e.heldElsewhere(tenant, id) {
			if e.opts.Forward != nil {
				if _, err := decodeData(data); err != nil {
					return err
				}
				return e.opts.Forward(ctx, Forwarded{Tenant: tenant, Run: id, Op: OpSignal, Event: event, Data: data})
			}
			return fmt.Errorf("run %s: %w: signal it on that replica: %w", id, errElsewhere, ErrState)
		}
		return fmt.Errorf("run %s is not running; resume it first: %w", id, ErrState)
	}
	return r.signalData(event, data)
}

// decodeData is a signal's data as its listen sees it.
func decodeData(data json.RawMessage) (any, error) {
	var payload any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &payload); err != nil {
			return nil, fmt.Errorf("signal data is not JSON: %v: %w", err, pluginapi.ErrInvalidArgument)
		}
	}
	return payload, nil
}

func (r *run) signalData(event string, data json.RawMessage) error {
	payload, err := decodeData(data)
	if err != nil {
		return err
	}
	return r.signal(event, payload)
}

func (e *Embedded) Cancel(ctx context.Context, tenant, id string) error {
	err := e.cancel(ctx, tenant, id)
	if errors.Is(err, errElsewhere) && e.opts.Forward != nil {
		// Not under e.stopped: the other replica's answer takes a while.
		return e.opts.Forward(ctx, Forwarded{Tenant: tenant, Run: id, Op: OpCancel})
	}
	return err
}

func (e *Embedded) cancel(ctx context.Context, tenant, id string) error {
	e.stopped.Lock()
	r := e.live(tenant, id)
	if r != nil && !r.ended() {
		e.stopped.Unlock()
		return r.cancelLive(ctx)
	}
	defer e.stopped.Unlock()
	release, err := e.hold(tenant, id)
	if err != nil {
		if errors.Is(err, errElsewhere) {
			return fmt.Errorf("%w; cancel it on that replica", err)
		}
		return err
	}
	if release != nil {
		defer release()
	}
	j, err := e.load(tenant, id)
	if err != nil {
		return err
	}
	st := statusOf(tenant, id, j.snapshot(), "")
	if st.Ended != nil {
		return fmt.Errorf("run %s already ended (%s): %w", id, st.State, ErrState)
	}
	_, err = j.append(Record{Kind: KindEnd, Status: StateCancelled})
	return err
}

// cancelLive cancels a run of this engine and waits for it to end, at
// most until ctx ends or CancelWait passes: the cancel is journaled first,
// so a run still stopping then ends cancelled all the same.
func (r *run) cancelLive(ctx context.Context) error {
	if _, err := r.j.append(Record{Kind: KindCancel}); err != nil {
		return err
	}
	r.cancelAsked.Store(true)
	r.cancel()
	ctx, cancel := context.WithTimeout(ctx, r.e.opts.CancelWait)
	defer cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil
	}
	// It may have ended on its own just before the cancellation.
	if st := r.status(); st.State != StateCancelled {
		return fmt.Errorf("run %s already ended (%s): %w", r.id, st.State, ErrState)
	}
	return nil
}

// Apply applies a request another replica forwarded (Options.Forward) to a
// run of this engine; here is false, and nothing done, when the run is not
// in this engine (another replica answers it, or none).
func (e *Embedded) Apply(ctx context.Context, f Forwarded) (here bool, err error) {
	r := e.live(f.Tenant, f.Run)
	if r == nil {
		return false, nil
	}
	switch f.Op {
	case OpSignal:
		return true, r.signalData(f.Event, f.Data)
	case OpCancel:
		if r.ended() {
			return true, fmt.Errorf("run %s already ended (%s): %w", f.Run, r.status().State, ErrState)
		}
		return true, r.cancelLive(ctx)
	}
	return true, fmt.Errorf("forwarded request %q: not signal or cancel: %w", f.Op, pluginapi.ErrInvalidArgument)
}

func (e *Embedded) Resume(ctx context.Context, tenant, id string) (Status, error) {
	e.stopped.Lock()
	defer e.stopped.Unlock()
	if r := e.live(tenant, id); r != nil {
		select {
		case <-r.done:
		default:
			return Status{}, fmt.Errorf("run %s is %s, not stopped: %w", id, r.status().State, ErrState)
		}
	}
	release, err := e.hold(tenant, id)
	if err != nil {
		return Status{}, err
	}
	launched := false
	defer func() {
		if !launched && release != nil {
			release()
		}
	}()
	j, err := e.load(tenant, id)
	if err != nil {
		return Status{}, err
	}
	st := statusOf(tenant, id, j.snapshot(), "")
	switch st.State {
	case StateCompleted, StateCancelled:
		return Status{}, fmt.Errorf("run %s %s; only an interrupted or failed run resumes: %w", id, st.State, ErrState)
	case StateCancelling:
		// Its cancel was journaled, and cexecd stopped before the run
		// ended: the cancel stands.
		if _, err := j.append(Record{Kind: KindEnd, Status: StateCancelled}); err != nil {
			return Status{}, err
		}
		return statusOf(tenant, id, j.snapshot(), ""), nil
	}
	first := j.records[0]
	doc, err := dsl.LoadWith(first.File, []byte(first.Document), dsl.Options{Journaled: true})
	if err != nil {
		return Status{}, fmt.Errorf("run %s: its document no longer loads: %w", id, err)
	}
	input, err := decodeInput(first.Input)
	if err != nil {
		return Status{}, err
	}
	r := e.newRun(tenant, id, doc, input)
	r.j = j
	r.started = first.Time
	if _, err := j.append(Record{Kind: KindResume}); err != nil {
		return Status{}, err
	}
	r.release, launched = release, true
	e.launch(r)
	return r.status(), nil
}

// ResumeAll resumes every run that was interrupted (cexecd stopped or was
// killed while it ran), and ends cancelled those whose cancel it had
// journaled; it is called once at start.
func (e *Embedded) ResumeAll(ctx context.Context) (int, error) {
	tenants, err := e.opts.Journals.RunTenants()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range tenants {
		ids, err := e.opts.Journals.ListRuns(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			if e.live(t, id) != nil {
				continue
			}
			j, err := e.load(t, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if st := statusOf(t, id, j.snapshot(), ""); st.State != StateInterrupted && st.State != StateCancelling {
				continue
			}
			st, err := e.Resume(ctx, t, id)
			if err != nil {
				if !errors.Is(err, errElsewhere) {
					errs = append(errs, err)
				}
				continue
			}
			if st.State == StateCancelled {
				e.opts.Log.Info("ended a workflow run cancelled before cexecd stopped", "tenant", t, "run", id)
				continue
			}
			e.opts.Log.Info("resumed workflow run", "tenant", t, "run", id)
			n++
		}
	}
	return n, errors.Join(errs...)
}

// statusOf derives a run's status from its journal; live is the state the
// engine holds for a run in this process ("" for none).
func statusOf(tenant, id string, recs []Record, live string) Status {
	st := Status{Run: id, Tenant: tenant, State: live}
	waiting := map[string]Pending{}
	cancelAsked := false
	for _, r := range recs {
		switch r.Kind {
		case KindRun:
			st.Workflow, st.Started = r.Name, r.Time
		case KindDone:
			st.TasksDone++
			st.Task = r.Task
		case KindStart:
			st.Task = r.Task
		case KindWaiting:
			waiting[r.Path] = Pending{Path: r.Path, Task: r.Task, Events: r.Events, Since: r.Time, Ask: r.Ask}
		case KindSignal, KindUnwait:
			delete(waiting, r.Path)
		case KindCancel:
			cancelAsked = true
		case KindResume:
			// The end before it no longer holds: the state is the live
			// one again, or interrupted when no engine runs it.
			st.Ended, st.Error, st.Output, st.State = nil, nil, nil, live
			cancelAsked = false
		case KindEnd:
			t := r.Time
			st.Ended, st.State, st.Error, st.Output = &t, r.Status, r.Error, r.Output
		}
	}
	if st.Ended == nil {
		for _, p := range waiting {
			st.Waiting = append(st.Waiting, p)
		}
		slices.SortFunc(st.Waiting, func(a, b Pending) int { return a.Since.Compare(b.Since) })
		switch {
		case cancelAsked:
			st.State = StateCancelling
		case st.State == "":
			st.State = StateInterrupted
		}
	} else {
		st.State = recsEndState(st.State)
	}
	return st
}

func recsEndState(s string) string {
	if s == "" {
		return StateFailed
	}
	return s
}
