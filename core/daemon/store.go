package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/auth"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/core/workspace"
)

// storeOpenTimeout bounds connecting to the store at start-up.
const storeOpenTimeout = 30 * time.Second

// openStore opens the postgres store when the config asks for one (nil
// otherwise) and points the vaults and the workspaces at it: replicas
// share a data_dir, so disk images are off and quotas measured.
func openStore(cfg *config.Config, vo *vault.Options, wo *workspace.Options, log hclog.Logger) (*store.Postgres, error) {
	if cfg.Store.Kind != config.StorePostgres {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	p, err := store.Open(ctx, store.Options{DSN: cfg.Store.DSN, Replica: cfg.Daemon.Replica,
		VaultKey: []byte(cfg.Store.VaultKey), Logger: log.Named("store")})
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	vo.Persister = p
	wo.SharedDataDir, wo.DiskImages = true, false
	wo.Slots = p
	wo.Usage = p
	wo.Skills = p
	log.Info("postgres store open: leases, slots, disk usage, vaults and skills shared with other replicas; disk quotas are measured, not images",
		"replica", cfg.Daemon.Replica)
	return p, nil
}

// subscribeStore drops a vault another replica changed from this one's
// cache, and every cached vault when such news may have been missed: a
// stale vault would issue a token another replica already gave another
// value.
func subscribeStore(p *store.Postgres, vaults *vault.Store) {
	p.Subscribe(store.TopicVault, func(payload string) {
		if tenant, session, ok := strings.Cut(payload, "/"); ok {
			vaults.Forget(tenant, session)
		}
	})
	p.OnResync(vaults.ForgetIdle)
}

// shareSignIns tells the other replicas of every sign-in made on this one,
// and retries a server here when another replica signed a tenant in to
// it: the token is on the shared data_dir, but the connection would wait
// out its backoff (up to 30 s) before trying it.
func shareSignIns(p *store.Postgres, a *auth.Manager, retry func(server, tenant string), log hclog.Logger) {
	a.OnSignIn(func(server, tenant string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Notify(ctx, store.TopicSignIn, tenant+"/"+server); err != nil {
			log.Warn("sign-in not announced to the other replicas; they retry the server after its backoff", "server", server, "error", err)
		}
	})
	p.Subscribe(store.TopicSignIn, func(payload string) {
		if tenant, server, ok := strings.Cut(payload, "/"); ok {
			log.Info("another replica signed in to a server; connecting with its sign-in now", "server", server, "tenant", tenant)
			retry(server, tenant)
		}
	})
}
