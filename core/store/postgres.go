package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultHeartbeat is how often a replica says it is alive. A replica not
// heard from for three heartbeats counts as dead: its leases and slots
// stop counting.
const DefaultHeartbeat = 2 * time.Second

// Options configure Open.
type Options struct {
	// DSN is the PostgreSQL connection string (a secret: never logged).
	DSN string
	// Replica is this cexecd's replica id, unique among the replicas.
	Replica string
	// VaultKey encrypts PII vaults at rest; any length, hashed to an
	// AES-256 key. Required.
	VaultKey []byte
	// Heartbeat is DefaultHeartbeat when zero.
	Heartbeat time.Duration
	Logger    hclog.Logger
}

// Postgres is the PostgreSQL store. It is safe for concurrent use.
type Postgres struct {
	pool    *pgxpool.Pool
	replica string
	aead    cipher.AEAD
	beat    time.Duration
	log     hclog.Logger

	stop chan struct{}
	done sync.WaitGroup

	mu   sync.Mutex
	subs map[string][]func(payload string)
	// resyncs run each time the listener is in LISTEN again (see OnResync).
	resyncs []func()
	// goneHooks are told of replicas that went (see OnReplicaGone); alive
	// are the replicas alive at the last check, connected those that held
	// connections then.
	goneHooks []func(replica string)
	alive     map[string]bool
	connected map[string]bool
	// leftovers are deletes of this replica's rows that failed (the
	// database was unreachable): the heartbeat runs them once it can, or
	// a slot, a lease or a waiting call would count or be listed for as
	// long as this replica lives.
	leftovers []leftover
}

// leftover is a delete to run again.
type leftover struct {
	what, sql string
	args      []any
}

// deleteLater queues a delete that failed for the heartbeat.
func (p *Postgres) deleteLater(what, sql string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leftovers = append(p.leftovers, leftover{what: what, sql: sql, args: args})
}

// deleteLeftovers runs the queued deletes, keeping those that fail again.
func (p *Postgres) deleteLeftovers(ctx context.Context) {
	p.mu.Lock()
	todo := p.leftovers
	p.leftovers = nil
	p.mu.Unlock()
	for i, l := range todo {
		if _, err := p.pool.Exec(ctx, l.sql, l.args...); err != nil {
			p.log.Warn("delete left by an outage of the database failed again", "what", l.what, "error", err)
			p.mu.Lock()
			p.leftovers = append(p.leftovers, todo[i:]...)
			p.mu.Unlock()
			return
		}
		p.log.Info("deleted what an outage of the database had left", "what", l.what)
	}
}

// Open connects, creates the schema and starts the heartbeat and the
// notification listener. Close stops them.
func Open(ctx context.Context, o Options) (*Postgres, error) {
	if o.Replica == "" {
		return nil, errors.New("store: replica id is empty")
	}
	if len(o.VaultKey) == 0 {
		return nil, errors.New("store: vault key is empty")
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	key := sha256.Sum256(o.VaultKey)
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("store: vault key: %w", unreachable(err))
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("store: vault key: %w", unreachable(err))
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		// pgx's parse errors can quote the DSN, password included.
		return nil, errors.New("store: the PostgreSQL DSN does not parse (it is not shown: it may hold a password)")
	}
	if err := checkReplicaFree(ctx, cfg.ConnConfig, o.Replica, 3*o.Heartbeat); err != nil {
		return nil, err
	}
	// Other replicas see this one alive while it holds a connection (see
	// liveSQL): a killed process's connections close at once.
	cfg.ConnConfig.RuntimeParams["application_name"] = appPrefix + o.Replica
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect to PostgreSQL: %w", unreachable(err))
	}
	p := &Postgres{pool: pool, replica: o.Replica, aead: aead, beat: o.Heartbeat, log: o.Logger,
		stop: make(chan struct{}), subs: map[string][]func(string){}}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := p.register(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	// The first view of who is alive: a replica that goes from now on is
	// one whose runs are taken over (OnReplicaGone).
	if err := p.checkGone(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	p.done.Add(2)
	go p.heartbeat()
	go p.listen()
	return p, nil
}

// Close stops the heartbeat and the listener, drops this replica's slots,
// its waiting approvals and its liveness (it serves nothing any more) and
// closes the connections. Its leases stay, dead, for survivors to adopt
// (AdoptSession).
func (p *Postgres) Close() error {
	close(p.stop)
	p.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.pool.Exec(ctx, `DELETE FROM cexec_slots WHERE replica = $1;`, p.replica)
	if err == nil {
		_, err = p.pool.Exec(ctx, `DELETE FROM cexec_approvals WHERE replica = $1;`, p.replica)
	}
	if err == nil {
		_, err = p.pool.Exec(ctx, `DELETE FROM cexec_replicas WHERE id = $1;`, p.replica)
	}
	p.pool.Close()
	if err != nil {
		return fmt.Errorf("store: close: %w", unreachable(err))
	}
	return nil
}

// replicaFreeWait is how long Open waits for a replica id's connections
// to go before it calls the id in use: a killed process's close at once,
// but PostgreSQL takes a moment to end their backends, and a replica
// restarted at once after a kill must start.
const replicaFreeWait = 3 * time.Second

// checkReplicaFree refuses a replica id that a running cexecd uses: it
// holds connections named after it and beat within window (connections of
// a lost node linger until PostgreSQL notices; its beats stop). The new one
// would take the running one's slots, approvals and reservations for its
// own previous run's and delete them, and its session ids would route to
// the other. Two cexecd on one host without cexec { replica } both derive
// it from the host name.
func checkReplicaFree(ctx context.Context, cc *pgx.ConnConfig, replica string, window time.Duration) error {
	cc = cc.Copy()
	cc.RuntimeParams["application_name"] = "cexec-start/" + replica
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("store: connect to PostgreSQL: %w", unreachable(err))
	}
	defer conn.Close(context.Background()) //nolint:errcheck // a one-off connection
	deadline := time.Now().Add(replicaFreeWait)
	for {
		n, err := replicaInUse(ctx, conn, replica, window)
		if err != nil {
			return fmt.Errorf("store: look for replica %q: %w", replica, unreachable(err))
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("store: replica id %q is in use by a running cexecd (it holds %d connections named %s%s and heartbeats); give each replica its own id with cexec { replica = \"...\" }",
				replica, n, appPrefix, replica)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: look for replica %q: %w", replica, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replicaInUse returns how many connections a running replica of that id
// holds (0: none runs).
func replicaInUse(ctx context.Context, conn *pgx.Conn, replica string, window time.Duration) (int, error) {
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`,
		appPrefix+replica).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	var beating bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('cexec_replicas') IS NOT NULL`).Scan(&beating); err != nil || !beating {
		return 0, err
	}
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cexec_replicas WHERE id = $1 AND seen > now() - make_interval(secs => $2))`,
		replica, window.Seconds()).Scan(&beating); err != nil || !beating {
		return 0, err
	}
	return n, nil
}

// appPrefix + the replica id is the application_name of its connections.
const appPrefix = "cexec/"

// liveSQL is true for the replica row r when that replica is alive: it beat
// within the window (the parameter secs, in seconds) and holds a
// connection now. The second half notices a killed replica at once; the
// first a hung or partitioned one within three heartbeats. A replica whose
// last beat is older than PostgreSQL's start is judged by the first half
// alone: the restart closed its connections, and it opens its next at its
// next beat.
func liveSQL(secs string) string {
	return `(r.seen > now() - make_interval(secs => ` + secs + `) AND (r.seen < pg_postmaster_start_time()
		OR EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = '` + appPrefix + `' || r.id)))`
}

// liveWindow is how long a replica counts as alive after its last beat.
func (p *Postgres) liveWindow() time.Duration { return 3 * p.beat }

// register records the replica as alive and drops the slots, session
// reservations and approvals a previous run of it left (it runs nothing
// yet), and marks that run's leases dead.
func (p *Postgres) register(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM cexec_slots WHERE replica = $1`, p.replica); err != nil {
		return fmt.Errorf("store: register replica: %w", unreachable(err))
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM cexec_approvals WHERE replica = $1`, p.replica); err != nil {
		return fmt.Errorf("store: register replica: %w", unreachable(err))
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM cexec_leases WHERE replica = $1 AND starts_with(session, $2)`, p.replica, pendingPrefix); err != nil {
		return fmt.Errorf("store: register replica: %w", unreachable(err))
	}
	// The previous run's sessions ended with it: their leases pass to a
	// replica id that is never alive, so they count no more and can be
	// adopted (here too) like a dead replica's.
	if _, err := p.pool.Exec(ctx, `UPDATE cexec_leases SET replica = $1 || $2 WHERE replica = $1`, p.replica, previousRun); err != nil {
		return fmt.Errorf("store: register replica: %w", unreachable(err))
	}
	return p.beatOnce(ctx)
}

func (p *Postgres) beatOnce(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO cexec_replicas (id, seen) VALUES ($1, now())
		ON CONFLICT (id) DO UPDATE SET seen = now()`, p.replica)
	if err != nil {
		return fmt.Errorf("store: heartbeat: %w", unreachable(err))
	}
	return nil
}

func (p *Postgres) heartbeat() {
	defer p.done.Done()
	t := time.NewTicker(p.beat)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.beat)
		if err := p.beatOnce(ctx); err != nil {
			p.log.Warn("store heartbeat failed", "error", err)
		} else {
			p.deleteLeftovers(ctx)
			if err := p.checkGone(ctx); err != nil {
				p.log.Warn("store heartbeat: cannot tell which replicas went", "error", err)
			}
		}
		cancel()
	}
}
