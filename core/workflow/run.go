package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/internal/ctxsleep"
)

// run is one run in this process.
type run struct {
	e          *Embedded
	tenant, id string
	doc        *dsl.Document
	input      any
	j          *journal
	x          exprs
	sch        schemas
	cancel     context.CancelFunc
	// cancelAsked: Cancel journaled a cancel, so the run ends cancelled
	// even when cexecd stops before it does.
	cancelAsked atomic.Bool
	done        chan struct{}
	// release ends the run's hold (RunHolder); nil without one.
	release        func()
	started        time.Time
	mu             sync.Mutex
	state, current string
	ctxVal         any
	// ctxVer counts changes of ctxVal, so that a task whose subtasks
	// changed it journals the result with it.
	ctxVer int
	// wake is closed (and replaced) when a signal arrives.
	wake chan struct{}
	// slot is the tenant's semaphore; the run holds one place in it while
	// active (its branches that are not waiting) is above zero.
	slot   chan struct{}
	slotMu sync.Mutex
	active int
	// sigMu makes a signal's check of what waits and its journaling one
	// step, so that two signals never both take one listen.
	sigMu sync.Mutex
}

// busy changes the count of the run's branches at work, taking a place in
// the tenant's slots when it rises from zero and giving it back when it
// falls to zero.
func (r *run) busy(ctx context.Context, delta int) error {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	was := r.active
	r.active += delta
	switch {
	case was > 0 && r.active <= 0:
		r.active = 0
		<-r.slot
	case was <= 0 && r.active > 0:
		select {
		case r.slot <- struct{}{}:
		case <-ctx.Done():
			r.active = was
			return ctx.Err()
		}
	}
	return nil
}

// releaseSlot gives the run's place back when it ends.
func (r *run) releaseSlot() {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	if r.active > 0 {
		r.active = 0
		<-r.slot
	}
}

// idle runs wait (a listen's or a wait's) with the slot given back while
// no other branch of the run works.
func (r *run) idle(ctx context.Context, wait func() error) error {
	if err := r.busy(ctx, -1); err != nil {
		return err
	}
	werr := wait()
	if err := r.busy(ctx, 1); err != nil {
		return err
	}
	return werr
}

func (r *run) setState(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
}

func (r *run) setTask(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = name
}

func (r *run) status() Status {
	r.mu.Lock()
	live, task := r.state, r.current
	r.mu.Unlock()
	st := statusOf(r.tenant, r.id, r.j.snapshot(), live)
	if st.Ended == nil && task != "" {
		st.Task = task
	}
	if st.Ended == nil && len(st.Waiting) > 0 && st.State == StateRunning {
		st.State = StateWaiting
	}
	return st
}

// ended reports whether the run's goroutine is over, its end journaled.
func (r *run) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// session is the session a run's calls and scripts are logged in.
func (r *run) session() string { return "wf-" + r.id }

// finish journals the run's end.
func (r *run) finish(out any, err error) {
	rec := Record{Kind: KindEnd, Status: StateCompleted}
	switch {
	case err != nil && r.cancelAsked.Load():
		rec.Status = StateCancelled
	case err != nil && r.e.ctx.Err() != nil:
		// cexecd stops: the run stays open and resumes at the next start.
		r.setState(StateInterrupted)
		return
	case err != nil:
		rec.Status, rec.Error = StateFailed, asError(err, "")
	default:
		rec.Output, _ = json.Marshal(out)
	}
	if _, jerr := r.j.append(rec); jerr != nil {
		r.e.opts.Log.Error("journal the end of a workflow run", "tenant", r.tenant, "run", r.id, "error", jerr)
	}
	r.setState(rec.Status)
}

func (r *run) baseVars() vars {
	wf := r.doc.Workflow
	return vars{
		"workflow": map[string]any{"id": r.id, "input": r.input, "startedAt": r.started.Format(time.RFC3339),
			"definition": map[string]any{"document": map[string]any{"namespace": wf.Document.Namespace, "name": wf.Document.Name, "version": wf.Document.Version}}},
		"runtime": map[string]any{"name": "cexec"},
		"secrets": map[string]any{},
	}
}

// execute runs the document from the top; finished tasks come from the
// journal.
func (r *run) execute(ctx context.Context) (any, error) {
	wf := r.doc.Workflow
	v := r.baseVars()
	input := r.input
	if wf.Input != nil && wf.Input.From != nil {
		in, err := r.x.value(ctx, wf.Input.From.Value, input, r.withContext(v))
		if err != nil {
			return nil, err
		}
		input = in
	}
	wctx := ctx
	var limit time.Duration
	if wf.Timeout != nil && wf.Timeout.Timeout != nil {
		d, err := duration(wf.Timeout.Timeout.After)
		if err != nil {
			return nil, err
		}
		limit = d
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, d-time.Since(r.started))
		defer cancel()
	}
	out, _, err := r.list(wctx, "", wf.Do, input, v)
	if err != nil {
		// The DSL's timeout error, not the bare context error of
		// whichever task the deadline cut.
		if ctx.Err() == nil && wctx.Err() != nil {
			return nil, errorf(ErrTimeout, 408, "the workflow timed out after %s", limit)
		}
		return nil, err
	}
	if wf.Output != nil {
		if wf.Output.As != nil {
			if out, err = r.x.value(ctx, wf.Output.As.Value, out, r.withContext(v)); err != nil {
				return nil, err
			}
		}
		if err := r.sch.check(wf.Output.Schema, out, "the workflow's output"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *run) withContext(v vars) vars {
	r.mu.Lock()
	defer r.mu.Unlock()
	return v.with("context", r.ctxVal)
}

// maxVisits bounds how often then may send a list back to one task.
const maxVisits = 10000

// list runs a task list from its first task, following then; it returns
// the last output and FlowEnd when the workflow is to end.
func (r *run) list(ctx context.Context, prefix string, tl *dsl.TaskList, input any, v vars) (any, string, error) {
	if tl == nil {
		return input, "", nil
	}
	visits := map[string]int{}
	data := input
	for i := 0; i < len(*tl); {
		item := (*tl)[i]
		n := visits[item.Key]
		visits[item.Key]++
		if n >= maxVisits {
			return nil, "", errorf(ErrRuntime, 500, "task %s ran %d times in one pass of its list; its then loops", item.Key, maxVisits)
		}
		path := prefix + "/" + item.Key
		if n > 0 {
			path += fmt.Sprintf("#%d", n)
		}
		out, flow, err := r.task(ctx, path, item, data, v)
		if err != nil {
			return nil, "", err
		}
		data = out
		switch flow {
		case "", dsl.FlowContinue:
			i++
		case dsl.FlowExit:
			return data, "", nil
		case dsl.FlowEnd:
			return data, dsl.FlowEnd, nil
		default:
			j, _ := tl.KeyAndIndex(flow)
			if j < 0 {
				return nil, "", errorf(ErrConfiguration, 400, "task %s: then %q names no task of its list", item.Key, flow)
			}
			i = j
		}
	}
	return data, "", nil
}

// task runs one task with the DSL's data flow: if, input (schema, from),
// the task, output (as, schema), export, then. A task the journal has as
// done is not run: its output and flow come from the journal.
func (r *run) task(ctx context.Context, path string, item *dsl.TaskItem, input any, v vars) (any, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if rec := r.j.lookup(r.j.done, path); rec != nil {
		var out any
		if len(rec.Output) > 0 {
			if err := json.Unmarshal(rec.Output, &out); err != nil {
				return nil, "", fmt.Errorf("journal of task %s: %w", path, err)
			}
		}
		if len(rec.Context) > 0 {
			var c any
			if err := json.Unmarshal(rec.Context, &c); err != nil {
				return nil, "", fmt.Errorf("journal of task %s: %w", path, err)
			}
			r.setContext(c)
		}
		return out, rec.Flow, nil
	}
	ver := r.contextVersion()
	r.setTask(item.Key)
	base := item.GetBase()
	v = v.with("task", map[string]any{"name": item.Key, "reference": path})
	if base.If != nil {
		ok, err := r.x.truthy(ctx, base.If.Value, input, r.withContext(v.with("input", input)))
		if err != nil {
			return nil, "", asError(err, path)
		}
		if !ok {
			return input, "", r.journalDone(path, item.Key, input, nil, "")
		}
	}
	in := input
	if base.Input != nil {
		if err := r.sch.check(base.Input.Schema, input, "task "+item.Key+"'s input"); err != nil {
			return nil, "", asError(err, path)
		}
		if base.Input.From != nil {
			var err error
			if in, err = r.x.value(ctx, base.Input.From.Value, input, r.withContext(v)); err != nil {
				return nil, "", asError(err, path)
			}
		}
	}
	v = v.with("input", in)
	tctx := ctx
	if base.Timeout != nil && base.Timeout.Timeout != nil {
		d, err := duration(base.Timeout.Timeout.After)
		if err != nil {
			return nil, "", asError(err, path)
		}
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	out, flow, err := r.do(tctx, path, item, in, v)
	if err != nil {
		if ctx.Err() == nil && tctx.Err() != nil {
			err = errorf(ErrTimeout, 408, "task %s timed out", item.Key)
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", asError(err, path)
	}
	if base.Output != nil {
		if base.Output.As != nil {
			if out, err = r.x.value(ctx, base.Output.As.Value, out, r.withContext(v)); err != nil {
				return nil, "", asError(err, path)
			}
		}
		if err := r.sch.check(base.Output.Schema, out, "task "+item.Key+"'s output"); err != nil {
			return nil, "", asError(err, path)
		}
	}
	var exported any
	if base.Export != nil {
		if base.Export.As != nil {
			if exported, err = r.x.value(ctx, base.Export.As.Value, out, r.withContext(v)); err != nil {
				return nil, "", asError(err, path)
			}
		} else {
			exported = out
		}
		if err := r.sch.check(base.Export.Schema, exported, "task "+item.Key+"'s export"); err != nil {
			return nil, "", asError(err, path)
		}
		r.setContext(exported)
	}
	if flow == "" && base.Then != nil {
		flow = base.Then.Value
	}
	var ctxAfter any
	if r.contextVersion() != ver {
		r.mu.Lock()
		ctxAfter = r.ctxVal
		r.mu.Unlock()
	}
	return out, flow, r.journalDone(path, item.Key, out, ctxAfter, flow)
}

func (r *run) setContext(v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctxVal = v
	r.ctxVer++
}

func (r *run) contextVersion() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctxVer
}

// journalDone records a finished task: its output, the flow after it, and
// $context when the task (or one of its subtasks) changed it, so that a
// resumed run that skips the task has the same $context after it.
func (r *run) journalDone(path, name string, out, exported any, flow string) error {
	rec := Record{Kind: KindDone, Path: path, Task: name, Flow: flow}
	var err error
	if rec.Output, err = json.Marshal(out); err != nil {
		return fmt.Errorf("task %s: output is not JSON: %w", name, err)
	}
	if exported != nil {
		if rec.Context, err = json.Marshal(exported); err != nil {
			return fmt.Errorf("task %s: export is not JSON: %w", name, err)
		}
	}
	_, err = r.j.append(rec)
	return err
}

// do runs the task itself.
func (r *run) do(ctx context.Context, path string, item *dsl.TaskItem, in any, v vars) (any, string, error) {
	cv := r.withContext(v)
	switch t := item.Task.(type) {
	case *dsl.CallFunction:
		return r.call(ctx, path, item.Key, t, in, cv)
	case *dsl.RunTask:
		return r.script(ctx, path, item.Key, t, in, cv)
	case *dsl.SetTask:
		out, err := r.x.value(ctx, map[string]any(t.Set), in, cv)
		return out, "", err
	case *dsl.SwitchTask:
		return r.switchTask(ctx, t, in, cv)
	case *dsl.ForTask:
		return r.forTask(ctx, path, t, in, v)
	case *dsl.ForkTask:
		return r.fork(ctx, path, t, in, v)
	case *dsl.TryTask:
		return r.try(ctx, path, t, in, v)
	case *dsl.RaiseTask:
		return nil, "", r.raise(ctx, t, in, cv)
	case *dsl.WaitTask:
		return in, "", r.wait(ctx, path, item.Key, t)
	case *dsl.ListenTask:
		out, err := r.listen(ctx, path, item.Key, t, in, cv)
		return out, "", err
	case *dsl.DoTask:
		return r.list(ctx, path, t.Do, in, v)
	}
	return nil, "", errorf(ErrConfiguration, 400, "task %s: %T is not a task cexec runs", item.Key, item.Task)
}

// effect marks the start of a task with an outside effect. A task that had
// started but not finished (cexecd stopped, or the run failed there) runs
// again from its start (at least once): the journal says so with a rerun
// record.
func (r *run) effect(path, name string) error {
	kind := KindStart
	if r.j.lookup(r.j.started, path) != nil {
		kind = KindRerun
		r.e.opts.Log.Warn("a workflow task started before (in flight at a crash, or it failed) and did not finish; running it again", "tenant", r.tenant, "run", r.id, "task", path)
	}
	_, err := r.j.append(Record{Kind: kind, Path: path, Task: name})
	return err
}

func (r *run) call(ctx context.Context, path, name string, t *dsl.CallFunction, in any, v vars) (any, string, error) {
	with, err := r.x.value(ctx, map[string]any(t.With), in, v)
	if err != nil {
		return nil, "", err
	}
	w := with.(map[string]any)
	c := MCPCall{Tenant: r.tenant, Run: r.id, Session: r.session(), Method: "tools/call"}
	c.Server, _ = w["server"].(string)
	if tool, ok := w["tool"].(string); ok {
		args, _ := w["arguments"].(map[string]any)
		if args == nil {
			args = map[string]any{}
		}
		c.Params = map[string]any{"name": tool, "arguments": args}
	} else {
		c.Method, _ = w["method"].(string)
		c.Params, _ = w["parameters"].(map[string]any)
	}
	if err := r.effect(path, name); err != nil {
		return nil, "", err
	}
	out, err := r.e.opts.Effects.CallMCP(ctx, c)
	if err != nil {
		return nil, "", err
	}
	out, err = normalize(out)
	return out, "", err
}

func (r *run) script(ctx context.Context, path, name string, t *dsl.RunTask, in any, v vars) (any, string, error) {
	s := t.Run.Script
	if s == nil || s.InlineCode == nil {
		return nil, "", errorf(ErrConfiguration, 400, "task %s: run needs script.code", name)
	}
	args := map[string]any{}
	if s.Arguments != nil {
		a, err := r.x.value(ctx, s.Arguments.AsMap(), in, v)
		if err != nil {
			return nil, "", err
		}
		args, _ = a.(map[string]any)
	}
	if err := r.effect(path, name); err != nil {
		return nil, "", err
	}
	out, err := r.e.opts.Effects.RunScript(ctx, Script{Tenant: r.tenant, Run: r.id, Session: r.session(), Code: *s.InlineCode, Arguments: args})
	if err != nil {
		return nil, "", err
	}
	out, err = normalize(out)
	return out, "", err
}

func (r *run) switchTask(ctx context.Context, t *dsl.SwitchTask, in any, v vars) (any, string, error) {
	var def *dsl.FlowDirective
	for _, item := range t.Switch {
		for _, c := range item {
			if c.When == nil {
				if def == nil {
					def = c.Then
				}
				continue
			}
			ok, err := r.x.truthy(ctx, c.When.Value, in, v)
			if err != nil {
				return nil, "", err
			}
			if ok {
				return in, c.Then.Value, nil
			}
		}
	}
	if def != nil {
		return in, def.Value, nil
	}
	return in, "", nil
}

func (r *run) forTask(ctx context.Context, path string, t *dsl.ForTask, in any, v vars) (any, string, error) {
	coll, err := r.x.eval(ctx, t.For.In, in, r.withContext(v))
	if err != nil {
		return nil, "", err
	}
	var items []any
	switch c := coll.(type) {
	case []any:
		items = c
	case nil:
	default:
		return nil, "", errorf(ErrExpression, 400, "for.in %s gave %T, not a list", t.For.In, coll)
	}
	each, at := t.For.Each, t.For.At
	if each == "" {
		each = "item"
	}
	if at == "" {
		at = "index"
	}
	data := in
	for i, it := range items {
		iv := v.with(each, it).with(at, float64(i))
		if t.While != "" {
			ok, err := r.x.truthy(ctx, t.While, data, r.withContext(iv))
			if err != nil {
				return nil, "", err
			}
			if !ok {
				break
			}
		}
		out, flow, err := r.list(ctx, fmt.Sprintf("%s/for/%d", path, i), t.Do, data, iv)
		if err != nil {
			return nil, "", err
		}
		data = out
		if flow == dsl.FlowEnd {
			return data, flow, nil
		}
	}
	return data, "", nil
}

func (r *run) fork(ctx context.Context, path string, t *dsl.ForkTask, in any, v vars) (any, string, error) {
	branches := *t.Fork.Branches
	outs := make([]any, len(branches))
	errs := make([]error, len(branches))
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once, failOnce sync.Once
	winner := -1
	// failed is the first branch error of a fork that is not a
	// competition: the fork fails with it and its other branches are
	// cancelled rather than waited for.
	var failed error
	// The branches count as the run's work while the fork itself waits.
	if err := r.busy(ctx, len(branches)-1); err != nil {
		return nil, "", err
	}
	for i, b := range branches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = r.busy(context.Background(), -1) }()
			out, _, err := r.task(fctx, path+"/fork/"+b.Key, b, in, v)
			outs[i], errs[i] = out, err
			switch {
			case err == nil && t.Fork.Compete:
				once.Do(func() { winner = i; cancel() })
			case err != nil && !t.Fork.Compete && fctx.Err() == nil:
				failOnce.Do(func() { failed = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if err := r.busy(ctx, 1); err != nil {
		return nil, "", err
	}
	if t.Fork.Compete {
		if winner >= 0 {
			return outs[winner], "", nil
		}
		return nil, "", errors.Join(errs...)
	}
	if failed != nil {
		return nil, "", failed
	}
	for _, err := range errs {
		if err != nil {
			return nil, "", err
		}
	}
	return outs, "", nil
}

func (r *run) try(ctx context.Context, path string, t *dsl.TryTask, in any, v vars) (any, string, error) {
	catch := t.Catch
	retry := catch.Retry
	if retry != nil && retry.Ref != "" {
		if use := r.doc.Workflow.Use; use != nil {
			retry = use.Retries[retry.Ref]
		}
	}
	for attempt := 0; ; attempt++ {
		apath := fmt.Sprintf("%s/try@%d", path, attempt)
		var we *Error
		rec := r.j.lookup(r.j.caught, apath)
		if rec != nil {
			we = rec.Error
		} else {
			out, flow, err := r.list(ctx, apath, t.Try, in, v)
			if err == nil {
				return out, flow, nil
			}
			if ctx.Err() != nil {
				return nil, "", err
			}
			we = asError(err, apath)
			ok, err := r.catches(ctx, catch, we, in, v)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				return nil, "", we
			}
		}
		ev := v.with(errVar(catch.As), we.asMap())
		again := retry != nil && r.retries(ctx, retry, attempt, in, ev)
		if retry != nil && !again && catch.Do == nil {
			// Retries exhausted: the error stands. It is not journaled
			// as caught, so a resumed run tries once more.
			return nil, "", we
		}
		if rec == nil {
			if _, err := r.j.append(Record{Kind: KindCaught, Path: apath, Error: we}); err != nil {
				return nil, "", err
			}
		}
		if again {
			next := fmt.Sprintf("%s/try@%d/", path, attempt+1)
			if !r.j.hasUnder(next) {
				if err := ctxsleep.Sleep(ctx, retryDelay(retry, attempt)); err != nil {
					return nil, "", err
				}
			}
			continue
		}
		if catch.Do != nil {
			return r.list(ctx, path+"/catch", catch.Do, in, ev)
		}
		return in, "", nil
	}
}

func errVar(as string) string {
	if as == "" {
		return "error"
	}
	return as
}

// catches says whether a try's catch takes the error: its errors.with
// filter, when and exceptWhen.
func (r *run) catches(ctx context.Context, c *dsl.TryTaskCatch, we *Error, in any, v vars) (bool, error) {
	if f := c.Errors.With; f != nil {
		if f.Type != "" && f.Type != we.Type || f.Status != 0 && f.Status != we.Status ||
			f.Title != "" && f.Title != we.Title || f.Details != "" && f.Details != we.Detail {
			return false, nil
		}
	}
	ev := r.withContext(v.with(errVar(c.As), we.asMap()))
	if c.When != nil {
		if ok, err := r.x.truthy(ctx, c.When.Value, in, ev); err != nil || !ok {
			return false, err
		}
	}
	if c.ExceptWhen != nil {
		if ok, err := r.x.truthy(ctx, c.ExceptWhen.Value, in, ev); err != nil || ok {
			return false, err
		}
	}
	return true, nil
}

// retries says whether attempt (0 the first) is followed by another.
func (r *run) retries(ctx context.Context, p *dsl.RetryPolicy, attempt int, in any, v vars) bool {
	limit := 0
	if p.Limit.Attempt != nil {
		limit = p.Limit.Attempt.Count
	}
	if limit > 0 && attempt+1 >= limit {
		return false
	}
	if limit == 0 {
		return false
	}
	cv := r.withContext(v)
	if p.When != nil {
		if ok, err := r.x.truthy(ctx, p.When.Value, in, cv); err != nil || !ok {
			return false
		}
	}
	if p.ExceptWhen != nil {
		if ok, err := r.x.truthy(ctx, p.ExceptWhen.Value, in, cv); err != nil || ok {
			return false
		}
	}
	return true
}

func retryDelay(p *dsl.RetryPolicy, attempt int) time.Duration {
	d := time.Duration(0)
	if p.Delay != nil {
		d, _ = duration(p.Delay)
	}
	if b := p.Backoff; b != nil {
		switch {
		case b.Linear != nil:
			d *= time.Duration(attempt + 1)
		case b.Exponential != nil:
			d <<= min(attempt, 20)
		}
	}
	return d
}

func (r *run) raise(ctx context.Context, t *dsl.RaiseTask, in any, v vars) error {
	def := t.Raise.Error.Definition
	if def == nil && t.Raise.Error.Ref != nil {
		if use := r.doc.Workflow.Use; use != nil {
			def = use.Errors[*t.Raise.Error.Ref]
		}
	}
	if def == nil {
		return errorf(ErrConfiguration, 400, "raise: no error definition")
	}
	we := &Error{Status: def.Status}
	str := func(x any) (string, error) {
		out, err := r.x.value(ctx, x, in, v)
		if err != nil {
			return "", err
		}
		s, _ := out.(string)
		return s, nil
	}
	var err error
	if def.Type != nil {
		if we.Type, err = str(def.Type.String()); err != nil {
			return err
		}
	}
	if def.Title != nil {
		if we.Title, err = str(def.Title.String()); err != nil {
			return err
		}
	}
	if def.Detail != nil {
		if we.Detail, err = str(def.Detail.String()); err != nil {
			return err
		}
	}
	return we
}

// wait sleeps; a resumed run waits only what was left.
func (r *run) wait(ctx context.Context, path, name string, t *dsl.WaitTask) error {
	d, err := duration(t.Wait)
	if err != nil {
		return err
	}
	until := time.Now().Add(d).UTC()
	if rec := r.j.lookup(r.j.started, path); rec != nil && rec.Until != nil {
		until = *rec.Until
	} else if _, err := r.j.append(Record{Kind: KindStart, Path: path, Task: name, Until: &until}); err != nil {
		return err
	}
	return r.idle(ctx, func() error { return ctxsleep.Sleep(ctx, time.Until(until)) })
}

// listen waits for one of its events, sent with Signal; a signal that
// arrived before a crash is in the journal. Its metadata.ask (expressions
// evaluated now) is journaled with the wait: the question for a person.
func (r *run) listen(ctx context.Context, path, name string, t *dsl.ListenTask, in any, v vars) (any, error) {
	events := listenEvents(t)
	if r.j.lookup(r.j.waiting, path) == nil {
		var ask json.RawMessage
		if q, ok := t.Metadata["ask"]; ok {
			val, err := r.x.value(ctx, q, in, v)
			if err != nil {
				return nil, fmt.Errorf("task %s: metadata.ask: %w", name, err)
			}
			if ask, err = json.Marshal(val); err != nil {
				return nil, fmt.Errorf("task %s: metadata.ask is not JSON: %w", name, err)
			}
		}
		rec, err := r.j.append(Record{Kind: KindWaiting, Path: path, Task: name, Events: events, Ask: ask})
		if err != nil {
			return nil, err
		}
		if fn := r.e.opts.OnWaiting; fn != nil {
			fn(r.tenant, r.id, Pending{Path: path, Task: name, Events: events, Since: rec.Time, Ask: ask})
		}
	}
	var data any
	err := r.idle(ctx, func() error {
		for {
			r.mu.Lock()
			wake := r.wake
			r.mu.Unlock()
			if rec := r.j.lookup(r.j.signals, path); rec != nil {
				if len(rec.Data) > 0 {
					return json.Unmarshal(rec.Data, &data)
				}
				return nil
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	if err != nil && r.e.ctx.Err() == nil {
		// Its timeout or a cut branch ended the wait: it must no longer
		// show as waiting nor take a signal. (When cexecd stops, it
		// still waits and resumes waiting.)
		r.sigMu.Lock()
		if r.j.lookup(r.j.signals, path) == nil {
			if _, jerr := r.j.append(Record{Kind: KindUnwait, Path: path, Task: name}); jerr != nil {
				r.e.opts.Log.Error("journal that a listen stopped waiting", "tenant", r.tenant, "run", r.id, "task", path, "error", jerr)
			}
		}
		r.sigMu.Unlock()
	}
	return data, err
}

// listenEvents lists the event types a listen takes; "" is any event: a
// filter without a type, or to.any with no filters (the DSL's "any event").
func listenEvents(t *dsl.ListenTask) []string {
	var out []string
	to := t.Listen.To
	add := func(f *dsl.EventFilter) {
		if f != nil {
			typ := ""
			if f.With != nil {
				typ = f.With.Type
			}
			out = append(out, typ)
		}
	}
	if to != nil {
		add(to.One)
		for _, f := range to.Any {
			add(f)
		}
		if to.One == nil && len(to.Any) == 0 {
			out = append(out, "")
		}
	}
	return out
}

// signal journals an event for the first listen waiting for it and wakes
// the run.
func (r *run) signal(event string, data any) error {
	r.sigMu.Lock()
	defer r.sigMu.Unlock()
	st := r.status()
	for _, p := range st.Waiting {
		if slices.Contains(p.Events, event) || slices.Contains(p.Events, "") {
			raw, err := json.Marshal(data)
			if err != nil {
				return err
			}
			if _, err := r.j.append(Record{Kind: KindSignal, Path: p.Path, Task: p.Task, Event: event, Data: raw}); err != nil {
				return err
			}
			r.mu.Lock()
			close(r.wake)
			r.wake = make(chan struct{})
			r.mu.Unlock()
			return nil
		}
	}
	var waits []string
	for _, p := range st.Waiting {
		waits = append(waits, fmt.Sprintf("%s (task %s)", p.Events, p.Task))
	}
	if len(waits) == 0 {
		return fmt.Errorf("run %s waits for no event: %w", r.id, ErrState)
	}
	return fmt.Errorf("run %s does not wait for event %q; it waits for %v: %w", r.id, event, waits, ErrState)
}
