//go:build !race

package jqworker

// maxWorkerRSS bounds a worker's peak resident memory in
// TestEvalMemoryBound: its limit, and some room for the runtime (measured
// 166 MiB for a worker that reached its limit).
const maxWorkerRSS = MemoryLimit + 128<<20
