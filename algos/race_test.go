//go:build race

package algos_test

// raceDetector says that the tests run with the race detector, which makes
// the single-goroutine simulator about eight times slower: the largest
// simulations skip then, and scripts/test.sh runs them without it.
const raceDetector = true
