package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestServeHostCalls drives ServeHostCalls over a socket pair. A call is
// answered by the goroutine that read it while nothing else is in flight;
// these cases check that this never holds up a call made meanwhile.
func TestServeHostCalls(t *testing.T) {
	tests := []struct {
		name string
		// calls are sent in order; a call named "slow" returns only once
		// every other call has been made.
		calls []string
	}{
		{name: "one after the other", calls: []string{"a", "b", "c"}},
		{name: "a slow call does not hold up the next", calls: []string{"slow", "b"}},
		{name: "nor several", calls: []string{"slow", "b", "c", "d"}},
		{name: "nor one made while it is read", calls: []string{"b", "slow", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := net.Pipe()
			t.Cleanup(func() { _ = ours.Close() })
			quick := make(chan struct{}, len(tt.calls))
			others := 0
			for _, c := range tt.calls {
				if c != "slow" {
					others++
				}
			}
			host := &recHost{fn: func(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
				if method == "slow" {
					for range others {
						select {
						case <-quick:
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}
				} else {
					quick <- struct{}{}
				}
				return json.RawMessage(strconv.Quote(method)), nil
			}}
			served := make(chan error, 1)
			go func() {
				served <- ServeHostCalls(t.Context(), bufio.NewReader(theirs), theirs, host, 0)
				_ = theirs.Close()
			}()
			_ = ours.SetDeadline(time.Now().Add(10 * time.Second))
			go func() {
				for i, c := range tt.calls {
					b, _ := json.Marshal(map[string]any{"op": "call", "id": i, "method": c})
					if _, err := ours.Write(appendFrame(nil, kindJSON, b)); err != nil {
						return
					}
					if c == "slow" {
						// Long enough for the slow call to be in flight
						// before the next is sent.
						time.Sleep(2 * handOffAfter)
					}
				}
			}()
			r := bufio.NewReader(ours)
			var got []string
			for range tt.calls {
				_, payload, err := readFrame(r)
				if err != nil {
					t.Fatalf("after replies %v: %v", got, err)
				}
				var rep struct {
					Result string `json:"result"`
				}
				if err := json.Unmarshal(payload, &rep); err != nil {
					t.Fatal(err)
				}
				got = append(got, rep.Result)
			}
			// In any order: the slow call answers once the others have
			// been made, not once their replies are written. Were it to hold
			// up the reading, the replies would never come.
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tt.calls))) {
				t.Errorf("replies %v to the calls %v: want each answered", got, tt.calls)
			}
			_ = ours.Close()
			if err := <-served; err != nil {
				t.Errorf("ServeHostCalls: %v", err)
			}
		})
	}
}
