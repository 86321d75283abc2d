package mcpface

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// An SSE client whose stream drops reconnects on its own (EventSource)
// and goes on posting without initialize, so without help it lands in a
// new session: not the one initialize's instructions named, with a new
// log and none of the PII tokens it was shown. The endpoint event
// therefore carries the session id as its event id, which EventSource
// sends back as Last-Event-ID, and a stream that names a session of the
// same tenant and authentication that ended with its stream resumes it.
// A live session is never taken over, and an ended one is resumable for
// SessionIdleTTL, as long as an idle streamable session lives.

// sseStreams remembers the SSE sessions that can be resumed.
type sseStreams struct {
	ttl time.Duration

	mu    sync.Mutex
	live  map[string]sseOwner
	ended map[string]sseOwner
}

type sseOwner struct {
	tenant, auth string
	until        time.Time // for an ended one, when it can no longer be resumed
	resumed      bool      // a live one that was initialized on an earlier stream
}

func newSSEStreams(ttl time.Duration) *sseStreams {
	return &sseStreams{ttl: ttl, live: map[string]sseOwner{}, ended: map[string]sseOwner{}}
}

// open returns the session a new stream of tenant's gets: the ended one
// lastID names if the same tenant and authentication opened it, else
// newID().
func (s *sseStreams) open(tenant, auth, lastID string, newID func() string) (id string, resumed bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, o := range s.ended {
		if now.After(o.until) {
			delete(s.ended, id)
		}
	}
	if o, ok := s.ended[lastID]; ok && o.tenant == tenant && o.auth == auth {
		delete(s.ended, lastID)
		id, resumed = lastID, true
	} else {
		id = newID()
	}
	s.live[id] = sseOwner{tenant: tenant, auth: auth, resumed: resumed}
	return id, resumed
}

// wasResumed reports whether the live session id was resumed.
func (s *sseStreams) wasResumed(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id].resumed
}

// uninitializedNote heads r with a note when the request's session never
// initialized: an SSE client that reconnects without the last event id
// (the TypeScript SDK's SSE transport drops it) posts on into a new
// session, so its results would otherwise land in a session the agent was
// never told of, where the PII tokens it was shown are not restored.
func uninitializedNote(ctx context.Context, r reply) reply {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" || cs.Initialized() {
		return r
	}
	r.text = "[This connection's session is " + cs.SessionID() + ", which it never initialized: an SSE stream that reconnected starts a new session, " +
		"so PII tokens shown before are not restored here. Reconnect and initialize, or pass the earlier session as session to continue its log.]\n" + r.text
	return r
}

// closed records that the stream of an SSE session ended.
func (s *sseStreams) closed(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.live[id]
	if !ok {
		return
	}
	delete(s.live, id)
	o.until = time.Now().Add(s.ttl)
	s.ended[id] = o
}

type sseIDKey struct{}

// withEventID has the SSE handler's endpoint event carry the session id
// the stream's session-id generator chose (setSSEID) as its event id.
func withEventID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := new(string)
		next.ServeHTTP(&eventIDWriter{ResponseWriter: w, id: id}, r.WithContext(context.WithValue(r.Context(), sseIDKey{}, id)))
	})
}

// setSSEID tells withEventID the stream's session id.
func setSSEID(ctx context.Context, id string) {
	if p, ok := ctx.Value(sseIDKey{}).(*string); ok {
		*p = id
	}
}

type eventIDWriter struct {
	http.ResponseWriter
	id      *string
	stamped bool
}

var endpointEvent = []byte("event: endpoint\n")

func (w *eventIDWriter) Write(p []byte) (int, error) {
	if !w.stamped && *w.id != "" && bytes.HasPrefix(p, endpointEvent) {
		w.stamped = true
		if _, err := w.ResponseWriter.Write([]byte("id: " + *w.id + "\n")); err != nil {
			return 0, err
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *eventIDWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *eventIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
