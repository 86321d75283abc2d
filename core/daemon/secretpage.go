package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/mcpface"
)

// secretPages serves the one-time pages where a user types the secret
// fields of a workflow's question (mcpface.SecretAsker): a loopback HTTP
// listener in cexecd, started on first use, as the sign-in redirect's is.
// A page's answer signals its run from here, so the secret reaches the run
// without passing through the agent's client, a log line or the audit log.
type secretPages struct {
	log hclog.Logger

	mu     sync.Mutex
	base   string
	srv    *http.Server
	closed bool
	pages  map[string]*secretPage
}

// secretPage is one question's page; it answers once.
type secretPage struct {
	fields []secretField
	known  map[string]any
	signal func(ctx context.Context, data json.RawMessage) error
	done   chan error
}

type secretField struct {
	Name, Title, Type string
	Required          bool
}

func newSecretPages(log hclog.Logger) *secretPages {
	return &secretPages{log: log, pages: map[string]*secretPage{}}
}

// start listens on 127.0.0.1 the first time a page is opened.
func (p *secretPages) start() (string, error) {
	if p.closed {
		return "", errors.New("cexecd is stopping")
	}
	if p.base != "" {
		return p.base, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen for secret pages: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/secret/{token}", p.serve)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Warn("secret pages listener", "error", err)
		}
	}()
	p.base, p.srv = "http://"+ln.Addr().String(), srv
	return p.base, nil
}

// close stops the listener; open pages expire.
func (p *secretPages) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.srv != nil {
		_ = p.srv.Close()
	}
	clear(p.pages)
}

// open makes a page for schema's fields; it is removed when ctx ends or it
// has been answered.
func (p *secretPages) open(ctx context.Context, schema, known json.RawMessage, signal func(context.Context, json.RawMessage) error) (string, <-chan error, error) {
	var s struct {
		Properties map[string]struct {
			Title string `json:"title"`
			Type  string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return "", nil, fmt.Errorf("secret fields: %w", err)
	}
	pg := &secretPage{signal: signal, done: make(chan error, 1)}
	if err := json.Unmarshal(known, &pg.known); err != nil || pg.known == nil {
		pg.known = map[string]any{}
	}
	for name, f := range s.Properties {
		title := f.Title
		if title == "" {
			title = name
		}
		pg.fields = append(pg.fields, secretField{Name: name, Title: title, Type: f.Type, Required: slices.Contains(s.Required, name)})
	}
	sort.Slice(pg.fields, func(i, j int) bool { return pg.fields[i].Name < pg.fields[j].Name })
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	token := hex.EncodeToString(b)
	p.mu.Lock()
	base, err := p.start()
	if err == nil {
		p.pages[token] = pg
	}
	p.mu.Unlock()
	if err != nil {
		return "", nil, err
	}
	context.AfterFunc(ctx, func() { p.take(token) })
	return base + "/secret/" + token, pg.done, nil
}

func (p *secretPages) take(token string) *secretPage {
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := p.pages[token]
	delete(p.pages, token)
	return pg
}

var secretForm = template.Must(template.New("secret").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>cexec</title></head><body>
<h1>cexec needs a secret</h1>
<p>What you type here goes to cexec only, not to the AI agent.</p>
<form method="post">
{{range .}}<p><label>{{.Title}} <input type="password" name="{{.Name}}"{{if .Required}} required{{end}}></label></p>
{{end}}<p><button type="submit">Send</button></p>
</form></body></html>
`))

func (p *secretPages) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	token := r.PathValue("token")
	switch r.Method {
	case http.MethodGet:
		p.mu.Lock()
		pg := p.pages[token]
		p.mu.Unlock()
		if pg == nil {
			http.Error(w, "This page has expired or was already used.", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = secretForm.Execute(w, pg.fields)
	case http.MethodPost:
		if err := r.ParseForm(); err != nil {
			http.Error(w, "malformed form", http.StatusBadRequest)
			return
		}
		pg := p.take(token)
		if pg == nil {
			http.Error(w, "This page has expired or was already used.", http.StatusNotFound)
			return
		}
		data, err := pg.answer(r)
		if err == nil {
			err = pg.signal(r.Context(), data)
		}
		pg.done <- err
		if err != nil {
			// The error names a field or the run, never a value.
			http.Error(w, "cexec could not take the answer: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "Thank you. cexec has the answer; you can close this page.")
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// answer is the page's fields, typed as their schema says, over the known
// answer.
func (pg *secretPage) answer(r *http.Request) (json.RawMessage, error) {
	out := map[string]any{}
	for k, v := range pg.known {
		out[k] = v
	}
	for _, f := range pg.fields {
		v := r.PostForm.Get(f.Name)
		if v == "" {
			if f.Required {
				return nil, fmt.Errorf("field %s is required", f.Name)
			}
			continue
		}
		switch f.Type {
		case "number", "integer":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("field %s must be a number", f.Name)
			}
			out[f.Name] = n
		case "boolean":
			out[f.Name] = v == "true" || v == "on"
		default:
			out[f.Name] = v
		}
	}
	return json.Marshal(out)
}

// AskSecret opens a page for the secret fields of run's question; its
// answer signals the run in sc's tenant (mcpface.SecretAsker).
func (v workflowView) AskSecret(ctx context.Context, sc mcpface.Scope, run, event string, schema, known json.RawMessage) (string, <-chan error, error) {
	if v.secrets == nil {
		return "", nil, errors.New("this daemon serves no secret pages")
	}
	return v.secrets.open(ctx, schema, known, func(ctx context.Context, data json.RawMessage) error {
		// known may hold tokens the agent's user was shown; the page's
		// fields are the user's own.
		data, err := v.untokenize(ctx, sc, data)
		if err != nil {
			return err
		}
		return v.svc.workflows.Signal(ctx, sc.Tenant, run, event, data)
	})
}
