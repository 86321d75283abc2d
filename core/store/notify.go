package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// channel is the one LISTEN/NOTIFY channel; messages carry their topic.
const channel = "cexec_changes"

// TopicSignIn is the notification of a tenant's sign-in to an upstream
// server (its token is in the shared data_dir/auth); its payload is
// "tenant/server". Other replicas retry that server's connection at once
// instead of at the end of its backoff.
const TopicSignIn = "signin"

type message struct {
	Topic   string `json:"t"`
	Payload string `json:"p"`
	Replica string `json:"r"`
}

// Subscribe calls fn with the payload of every notification of topic that
// another replica sends (a replica's own changes are already applied).
// fn runs on the listener goroutine and must not block.
func (p *Postgres) Subscribe(topic string, fn func(payload string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs[topic] = append(p.subs[topic], fn)
}

// OnResync calls fn each time the change listener starts listening, the
// first time and after every reconnect. Notifications sent while it was
// not listening (PostgreSQL restarted, the connection was cut) are lost,
// so a cache kept fresh by Subscribe must be dropped whole in fn. fn runs
// on the listener goroutine and must not block.
func (p *Postgres) OnResync(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resyncs = append(p.resyncs, fn)
}

// MaxNotify is the most bytes a notification may take: PostgreSQL refuses
// a NOTIFY payload of 8000 bytes or more.
const MaxNotify = 7999

// ErrTooLarge is a notification longer than MaxNotify.
var ErrTooLarge = errors.New("notification too large")

// Notify tells the other replicas about a change of topic.
func (p *Postgres) Notify(ctx context.Context, topic, payload string) error {
	b, err := encodeMessage(message{Topic: topic, Payload: payload, Replica: p.replica})
	if err != nil {
		return fmt.Errorf("store: notify %s: %w", topic, err)
	}
	if _, err := p.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, string(b)); err != nil {
		return fmt.Errorf("store: notify %s: %w", topic, unreachable(err))
	}
	return nil
}

// encodeMessage is a notification as sent: without HTML escapes, which
// would take six bytes for each <, > and & of a payload, and refused when
// PostgreSQL would refuse it.
func encodeMessage(m message) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > MaxNotify {
		return nil, fmt.Errorf("%d bytes, PostgreSQL takes at most %d: %w", len(b), MaxNotify, ErrTooLarge)
	}
	return b, nil
}

// notifyQuiet is Notify for a change already stored: a lost notification
// leaves another replica's cache stale until it reloads, which is logged,
// not failed.
func (p *Postgres) notifyQuiet(ctx context.Context, topic, payload string) {
	if err := p.Notify(ctx, topic, payload); err != nil {
		p.log.Warn("change notification not sent", "topic", topic, "error", err)
	}
}

// listen holds one connection in LISTEN and dispatches notifications,
// reconnecting after errors until Close.
func (p *Postgres) listen() {
	defer p.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	for ctx.Err() == nil {
		err := p.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("change notifications interrupted; reconnecting", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.beat):
		}
	}
}

func (p *Postgres) listenOnce(ctx context.Context) error {
	pc, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection will be in LISTEN: it must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.Background()) //nolint:errcheck // closing a connection we drop
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	// After LISTEN: a change made before it is covered by the resync, one
	// made after by its notification.
	p.mu.Lock()
	resyncs := slices.Clone(p.resyncs)
	p.mu.Unlock()
	for _, fn := range resyncs {
		fn()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var m message
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.Replica == p.replica {
			continue
		}
		p.mu.Lock()
		subs := p.subs[m.Topic]
		p.mu.Unlock()
		for _, fn := range subs {
			fn(m.Payload)
		}
	}
}
