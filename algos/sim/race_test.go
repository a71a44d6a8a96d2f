//go:build race

package sim_test

// raceDetector says that the tests run with the race detector, which makes
// the single-goroutine simulator about eight times slower: the largest
// sweeps sample their rank counts then, and scripts/test.sh runs them
// whole without it.
const raceDetector = true
