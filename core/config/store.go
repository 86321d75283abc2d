package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Store kinds: where what replicas share is kept.
const (
	// StoreFiles keeps everything as files under data_dir (one cexecd, or
	// replicas without shared leases, slots and vaults).
	StoreFiles = "files"
	// StorePostgres keeps session leases, concurrency slots, counters, PII
	// vaults (encrypted) and the skills registry in PostgreSQL, for
	// replicas that share data_dir on one volume.
	StorePostgres = "postgres"
)

// Store is the `store { ... }` block.
type Store struct {
	// Kind is StoreFiles (the default) or StorePostgres.
	Kind string
	// DSN is PostgreSQL's connection string; a secret, best from env().
	DSN string
	// VaultKey encrypts PII vaults in PostgreSQL; a secret from env().
	VaultKey string
}

type rawStore struct {
	Kind      *hcl.Attribute `hcl:"kind,optional"`
	DSN       *hcl.Attribute `hcl:"dsn,optional"`
	VaultKey  *hcl.Attribute `hcl:"vault_key,optional"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

// replicaRE is a replica id: it prefixes MCP session ids ("a.<id>"), so it
// holds no dot, and it names the replica in leases and HAProxy's config.
var replicaRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

func (d *decoder) store(cfg *Config, raw *rawStore, rawDaemon *rawDaemon) {
	cfg.Store.Kind = StoreFiles
	if raw != nil {
		if s, _, ok := d.str(raw.Kind, path("store", "kind")); ok {
			if s != StoreFiles && s != StorePostgres {
				d.errorf(raw.Kind.Expr.Range().Ptr(), "Invalid store kind", "%q is not a store: use %q (the default) or %q.", s, StoreFiles, StorePostgres)
			} else {
				cfg.Store.Kind = s
			}
		}
		dsn, dsnMarked, dsnOK := d.str(raw.DSN, path("store", "dsn"))
		key, keyMarked, keyOK := d.str(raw.VaultKey, path("store", "vault_key"))
		switch cfg.Store.Kind {
		case StorePostgres:
			switch {
			case raw.DSN == nil:
				d.errorf(raw.DeclRange.Ptr(), "Missing store dsn", `A postgres store needs dsn, e.g. dsn = env("CEXEC_PG_DSN").`)
			case dsnOK && dsn == "":
				d.errorf(raw.DSN.Expr.Range().Ptr(), "Empty store dsn", "dsn is empty; the variable it reads may be unset.")
			case dsnOK && !dsnMarked && strings.Contains(dsn, "password"):
				d.warnf(raw.DSN.Expr.Range().Ptr(), "Password in the config file", `The dsn holds a password in the clear; read it with env("CEXEC_PG_DSN") instead.`)
			}
			switch {
			case raw.VaultKey == nil:
				d.errorf(raw.DeclRange.Ptr(), "Missing store vault_key", `A postgres store encrypts PII vaults; set vault_key = env("CEXEC_VAULT_KEY") (at least 16 characters).`)
			case keyOK && len(key) < 16:
				d.errorf(raw.VaultKey.Expr.Range().Ptr(), "Short vault_key", "vault_key has %d characters; use at least 16 (a random string).", len(key))
			case keyOK && !keyMarked:
				d.warnf(raw.VaultKey.Expr.Range().Ptr(), "Secret in the config file", `vault_key is written in the file; read it with env("CEXEC_VAULT_KEY") instead.`)
			}
			cfg.Store.DSN, cfg.Store.VaultKey = dsn, key
		default:
			for _, a := range []*hcl.Attribute{raw.DSN, raw.VaultKey} {
				if a != nil {
					d.errorf(a.NameRange.Ptr(), "Setting of another store", "%s is for kind = %q; the store is %q.", a.Name, StorePostgres, cfg.Store.Kind)
				}
			}
		}
	}

	dd := &cfg.Daemon
	if rawDaemon != nil {
		if s, _, ok := d.str(rawDaemon.Replica, path("cexec", "replica")); ok {
			if !replicaRE.MatchString(s) {
				d.errorf(rawDaemon.Replica.Expr.Range().Ptr(), "Invalid replica id",
					"%q is not a replica id: use 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit (it prefixes session ids).", s)
			} else {
				dd.Replica = s
			}
		}
	}
	if dd.Replica == "" && cfg.Store.Kind == StorePostgres {
		dd.Replica = replicaFromHost()
	}
}

// replicaFromHost derives a replica id from the host name (a Kubernetes
// pod's name), when the config sets none.
func replicaFromHost() string {
	h, _ := os.Hostname()
	h = strings.ToLower(h)
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '_':
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 32 {
		s = strings.Trim(s[len(s)-32:], "-")
	}
	if !replicaRE.MatchString(s) {
		return fmt.Sprintf("r%d", os.Getpid())
	}
	return s
}

// view is the store block for MaskedJSON: the DSN and the key are secrets
// even when written in the file.
func (s Store) view() map[string]any {
	v := map[string]any{"kind": s.Kind}
	if s.DSN != "" {
		v["dsn"] = maskedValue
	}
	if s.VaultKey != "" {
		v["vault_key"] = maskedValue
	}
	return v
}
