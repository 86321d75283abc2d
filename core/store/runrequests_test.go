package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// bus is LISTEN/NOTIFY between replicas in memory: a notification reaches
// every replica but its sender, as Postgres.Subscribe promises.
type bus struct {
	mu   sync.Mutex
	subs map[string]map[string][]func(string) // replica → topic → fns
}

type busEnd struct {
	b       *bus
	replica string
}

func (e busEnd) Notify(_ context.Context, topic, payload string) error {
	if _, err := encodeMessage(message{Topic: topic, Payload: payload, Replica: e.replica}); err != nil {
		return err
	}
	e.b.mu.Lock()
	var fns []func(string)
	for r, m := range e.b.subs {
		if r != e.replica {
			fns = append(fns, m[topic]...)
		}
	}
	e.b.mu.Unlock()
	for _, fn := range fns {
		fn(payload)
	}
	return nil
}

func (e busEnd) Subscribe(topic string, fn func(string)) {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	if e.b.subs[e.replica] == nil {
		e.b.subs[e.replica] = map[string][]func(string){}
	}
	e.b.subs[e.replica][topic] = append(e.b.subs[e.replica][topic], fn)
}

// replicaRuns serves the requests of the runs it has.
func replicaRuns(runs ...string) func(context.Context, RunRequest) (RunReply, bool) {
	return func(_ context.Context, req RunRequest) (RunReply, bool) {
		for _, r := range runs {
			if r == req.Run {
				if req.Event == "wrong" {
					return RunReply{Error: "run " + r + " does not wait for event wrong", Kind: "state"}, true
				}
				return RunReply{}, true
			}
		}
		return RunReply{}, false
	}
}

func TestRunRequests(t *testing.T) {
	b := &bus{subs: map[string]map[string][]func(string){}}
	const wait = 200 * time.Millisecond
	a := NewRunRequests(busEnd{b, "a"}, wait, nil)
	a.Serve(replicaRuns("ra"))
	NewRunRequests(busEnd{b, "b"}, wait, nil).Serve(replicaRuns("rb1", "rb2"))
	NewRunRequests(busEnd{b, "c"}, wait, nil).Serve(replicaRuns("rc"))
	ctx := context.Background()

	tests := []struct {
		name    string
		req     RunRequest
		want    RunReply
		wantErr error
	}{
		{"held by b", RunRequest{Tenant: "t", Run: "rb1", Op: "signal", Event: "go"}, RunReply{}, nil},
		{"held by c", RunRequest{Tenant: "t", Run: "rc", Op: "cancel"}, RunReply{}, nil},
		{"holder's error", RunRequest{Tenant: "t", Run: "rb2", Op: "signal", Event: "wrong"},
			RunReply{Error: "run rb2 does not wait for event wrong", Kind: "state"}, nil},
		// a's own run is not a's to forward: nobody else answers.
		{"nobody holds it", RunRequest{Tenant: "t", Run: "ra", Op: "signal", Event: "go"}, RunReply{}, ErrNoReply},
		{"unknown run", RunRequest{Tenant: "t", Run: "gone", Op: "cancel"}, RunReply{}, ErrNoReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Send(ctx, tt.req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Send: %v, want %v", err, tt.wantErr)
			}
			got.ID = ""
			if got != tt.want {
				t.Fatalf("reply %+v, want %+v", got, tt.want)
			}
		})
	}

	// A cancel waits for its run to end; one slower than the sender's wait
	// must still be answered while the sender waits.
	t.Run("slow holder answers in time", func(t *testing.T) {
		b := &bus{subs: map[string]map[string][]func(string){}}
		const wait = time.Second
		s := NewRunRequests(busEnd{b, "s"}, wait, nil)
		NewRunRequests(busEnd{b, "h"}, wait, nil).Serve(func(ctx context.Context, req RunRequest) (RunReply, bool) {
			<-ctx.Done()
			return RunReply{}, true
		})
		if _, err := s.Send(ctx, RunRequest{Tenant: "t", Run: "slow", Op: "cancel"}); err != nil {
			t.Fatalf("Send to a holder that takes as long as it may: %v", err)
		}
	})

	t.Run("concurrent sends get their own replies", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				ev := "go"
				if i%2 == 1 {
					ev = "wrong"
				}
				got, err := a.Send(ctx, RunRequest{Tenant: "t", Run: "rb2", Op: "signal", Event: ev})
				if err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
				if (got.Error != "") != (ev == "wrong") {
					t.Errorf("send %d (%s) got %+v", i, ev, got)
				}
			})
		}
		wg.Wait()
	})

	t.Run("a reply nobody waits for is dropped", func(t *testing.T) {
		a.deliver(`{"id":"nobody","error":"x"}`)
		a.deliver(`not json`)
		a.mu.Lock()
		n := len(a.waiting)
		a.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d sends still wait", n)
		}
	})

	t.Run("ctx ends the wait", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := a.Send(cctx, RunRequest{Tenant: "t", Run: "gone", Op: "cancel"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Send with a cancelled ctx: %v", err)
		}
	})

	t.Run("too large", func(t *testing.T) {
		data, _ := json.Marshal(strings.Repeat("x", MaxNotify))
		_, err := a.Send(ctx, RunRequest{Tenant: "t", Run: "rb1", Op: "signal", Event: "go", Data: data})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Send of %d bytes of data: %v, want ErrTooLarge", len(data), err)
		}
	})
}

func TestEncodeMessageLimit(t *testing.T) {
	over := func(n int) string { return strings.Repeat("<", n) }
	base, _ := encodeMessage(message{Topic: "t", Payload: "", Replica: "a"})
	room := MaxNotify - len(base)
	for _, tt := range []struct {
		n    int
		fits bool
	}{{room, true}, {room + 1, false}} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			b, err := encodeMessage(message{Topic: "t", Payload: over(tt.n), Replica: "a"})
			if tt.fits && (err != nil || len(b) != MaxNotify) {
				t.Fatalf("%d bytes of <: %d bytes, %v", tt.n, len(b), err)
			}
			if !tt.fits && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d bytes of <: %v, want ErrTooLarge", tt.n, err)
			}
		})
	}
}
