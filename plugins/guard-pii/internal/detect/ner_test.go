package detect_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

// nerProtocolServer is a protocol-level stand-in for an NER service: it
// speaks the documented contract (POST {"text"} → {"entities": [{start,
// end, type, score}]}, offsets in code points) and "recognises" the names
// it was given by searching for them, so the client's request encoding,
// offset conversion and filtering are exercised over real HTTP.
type nerProtocolServer struct {
	names  map[string]string // name → entity type it is reported as
	calls  atomic.Int32
	header atomic.Value // last Authorization header
}

func (s *nerProtocolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	s.header.Store(r.Header.Get("Authorization"))
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want POST application/json", http.StatusBadRequest)
		return
	}
	var req struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	type entity struct {
		Start int     `json:"start"`
		End   int     `json:"end"`
		Type  string  `json:"type"`
		Score float64 `json:"score"`
	}
	ents := []entity{}
	for name, typ := range s.names {
		for off := 0; ; {
			i := strings.Index(req.Text[off:], name)
			if i < 0 {
				break
			}
			b := off + i
			start := utf8.RuneCountInString(req.Text[:b])
			ents = append(ents, entity{Start: start, End: start + utf8.RuneCountInString(name), Type: typ, Score: 0.91})
			off = b + len(name)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"entities": ents})
}

func TestNERPersonSpans(t *testing.T) {
	srv := &nerProtocolServer{names: map[string]string{"Zoë Müller": "PERSON", "José": "PER", "Acme GmbH": "ORG"}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ner, err := detect.NewNERClient(ts.URL, map[string]string{"Authorization": "Bearer t0ken"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := mustNew(t, detect.Options{NER: ner})
	if !slices.Contains(d.Types(), detect.Person) {
		t.Fatalf("PERSON not enabled by default with an NER endpoint: %v", d.Types())
	}
	text := "Ünïcode first: Zoë Müller (zoe@example.com) met José at Acme GmbH."
	tests := []struct {
		name      string
		types     []string
		want      []string
		wantCalls int32
	}{
		{"all types", nil, []string{"PERSON:Zoë Müller", "EMAIL:zoe@example.com", "PERSON:José"}, 1},
		{"person only", []string{detect.Person}, []string{"PERSON:Zoë Müller", "PERSON:José"}, 1},
		{"without person the endpoint is not called", []string{detect.Email}, []string{"EMAIL:zoe@example.com"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.calls.Load()
			got := detectAll(t, d, text, tt.types...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if calls := srv.calls.Load() - before; calls != tt.wantCalls {
				t.Errorf("endpoint called %d times, want %d", calls, tt.wantCalls)
			}
		})
	}
	if h, _ := srv.header.Load().(string); h != "Bearer t0ken" {
		t.Errorf("Authorization header %q not sent", h)
	}
}

func TestNERFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"server error", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "model not loaded", http.StatusInternalServerError)
		}, "500"},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("<html>"))
		}, "expected JSON"},
		{"offset outside the text", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"entities":[{"start":2,"end":400,"type":"PERSON"}]}`))
		}, "invalid offsets"},
		{"inverted entity", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"entities":[{"start":3,"end":1,"type":"PERSON"}]}`))
		}, "invalid offsets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(tt.handler)
			defer ts.Close()
			ner, err := detect.NewNERClient(ts.URL, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := mustNew(t, detect.Options{NER: ner})
			_, err = d.Detect(context.Background(), "Ada Lovelace wrote to ada@example.com", nil)
			if !errors.Is(err, pluginapi.ErrUnavailable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrUnavailable mentioning %q", err, tt.want)
			}
		})
	}
}

func TestNERDownAndCancelled(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := ts.URL
	ts.Close() // nothing listens there any more
	ner, err := detect.NewNERClient(url+"/ner?key=s3cret", nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mustNew(t, detect.Options{NER: ner}).Detect(context.Background(), "Ada", nil)
	if !errors.Is(err, pluginapi.ErrUnavailable) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("err = %v, want ErrUnavailable without the URL's query", err)
	}

	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	ner, err = detect.NewNERClient(slow.URL, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := mustNew(t, detect.Options{NER: ner}).Detect(ctx, "Ada", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestNERClientURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x/ner", "/relative", "http://"} {
		if _, err := detect.NewNERClient(u, nil, 0); err == nil {
			t.Errorf("NewNERClient(%q) accepted", u)
		}
	}
}
