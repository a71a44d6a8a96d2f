package fabric

import (
	"os"
	"testing"
)

// TestNoiseRates measures how often the judge is wrong on synthetic
// fabrics with +-50% noise, over 400 seeds per case: the rates quoted in
// the comments of gate, testMAD and TestJudgeSynthetic. It asserts
// nothing and runs only with FABRIC_RATES=1 (about 20 s):
//
//	FABRIC_RATES=1 go test -run TestNoiseRates -v ./cmd/cc-perf/internal/fabric/
func TestNoiseRates(t *testing.T) {
	if os.Getenv("FABRIC_RATES") == "" {
		t.Skip("set FABRIC_RATES=1 to measure the judge's error rates")
	}
	for _, sc := range []struct {
		name, schedule string
		n              int
		fabric         func(m *model)
		accused        int // hosts a right verdict accuses
	}{
		{"full healthy", "full", 8, func(m *model) {}, 0},
		{"full healthy n=32", "full", 32, func(m *model) {}, 0},
		{"quick healthy", "quick", 8, func(m *model) {}, 0},
		{"random healthy", "random", 8, func(m *model) {}, 0},
		{"directed healthy", "directed", 8, func(m *model) {}, 0},
		{"bisect healthy", "bisect", 8, func(m *model) {}, 0},
		{"full 1 slow 0.15", "full", 8, func(m *model) { m.slow(4, 0.15) }, 1},
		{"full 2 slow 0.15", "full", 8, func(m *model) { m.slow(4, 0.15).slow(1, 0.15) }, 2},
		{"full 1 slow 0.3", "full", 8, func(m *model) { m.slow(4, 0.3) }, 1},
		{"quick 1 slow 0.05", "quick", 8, func(m *model) { m.slow(4, 0.05) }, 1},
		{"quick 1 slow 0.15", "quick", 8, func(m *model) { m.slow(4, 0.15) }, 1},
		{"bisect 1 slow 0.05", "bisect", 8, func(m *model) { m.slow(5, 0.05) }, 1},
		{"directed tx 0.15", "directed", 8, func(m *model) { m.tx[2] = 0.15 }, 1},
		{"full link 0.15", "full", 8, func(m *model) { m.link[[2]int{1, 5}] = 0.15 }, 0},
		{"full healthy +-90%", "full", 8, func(m *model) { m.noise = 0.9 }, 0},
		{"quick healthy +-90%", "quick", 8, func(m *model) { m.noise = 0.9 }, 0},
	} {
		hosts := testHosts(sc.n)
		cfg := cfgOf(sc.schedule, nil)
		const runs = 400
		wrongHosts, links, inconclusive, noisy := 0, 0, 0, 0
		for seed := range uint64(runs) {
			m := newModel(sc.n, 0.5, seed+1000)
			sc.fabric(m)
			_, ms := run(t, cfg, m)
			v := Judge(hosts, nil, ms, nil, cfg)
			if len(accused(hosts, v)) != sc.accused {
				wrongHosts++
			}
			if len(failingLinks(v)) > 0 {
				links++
			}
			inconclusive += len(v.Inconclusive)
			if v.Noisy {
				noisy++
			}
		}
		t.Logf("%-20s runs with a wrong host verdict %3d/%d, with a failing link %3d, inconclusive hosts %3d, noisy runs %3d",
			sc.name, wrongHosts, runs, links, inconclusive, noisy)
	}
}
