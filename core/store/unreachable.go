package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// unreachable marks an error that is PostgreSQL's connection failing (the
// server stopped or restarted, the network cut), not the statement's, in
// words an operator acts on: pgx's own ("FATAL: terminating connection due
// to administrator command (SQLSTATE 57P01)", "conn closed") do not say
// the database is gone. Other errors pass as they are.
func unreachable(err error) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's own limit, which net.Error would match too.
		return err
	case errors.As(err, &pe):
		// Class 08: connection exception; 57P01-57P03: the server shuts
		// down or cannot take connections yet.
		if !strings.HasPrefix(pe.Code, "08") && pe.Code != "57P01" && pe.Code != "57P02" && pe.Code != "57P03" {
			return err
		}
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
	default:
		if !strings.Contains(err.Error(), "conn closed") {
			return err
		}
	}
	return fmt.Errorf("PostgreSQL cannot be reached (stopped, restarting or cut off); cexecd retries on the next request: %w", err)
}
