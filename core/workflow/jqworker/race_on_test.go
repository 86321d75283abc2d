//go:build race

package jqworker

// maxWorkerRSS bounds a worker's peak resident memory in
// TestEvalMemoryBound. The race detector's shadow memory is resident beside
// the heap but reserved at start, so the address-space limit does not count
// it: measured 322-405 MiB for a worker that reached its limit.
const maxWorkerRSS = 3 * MemoryLimit
