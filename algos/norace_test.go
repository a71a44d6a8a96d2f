//go:build !race

package algos_test

// raceDetector: see race_test.go.
const raceDetector = false
