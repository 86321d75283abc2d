// Package testutil holds what the repository's tests share: a buffer safe
// for concurrent writers, building a package of this module into a binary,
// skipping a test whose dependency is missing (a failure under CI, where a
// missing dependency means a broken install step, not an optional test),
// and stopping a peer's process for good (Stop).
package testutil
