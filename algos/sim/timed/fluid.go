package timed

import "math"

// The fluid model: activities (a CPU stage, a network flow) progress at
// rates that max-min fair sharing of the resources they use decides
// (progressive filling, as SimGrid's lmm): every activity's rate rises
// together until a resource it uses is full or it reaches its own cap;
// those freeze and the rest keep rising. Rates stay constant between two
// changes of the set of activities.

// resource is a capacity shared by the activities that use it: cores of a
// CPU pool (in units of one core), or a link (bytes per ns).
type resource struct {
	capacity float64
	left     float64 // capacity not yet given out (solve's scratch)
	users    int     // unfrozen activities using it (solve's scratch)
}

// activity is work in progress: remaining units, at most cap units per ns,
// on the resources it names.
type activity struct {
	remaining float64
	cap       float64
	res       []int
	rate      float64
	frozen    bool // solve's scratch
	done      func(s *Sim)
}

// solve gives every activity its max-min fair rate.
func solve(res []resource, acts []*activity) {
	for i := range res {
		res[i].left, res[i].users = res[i].capacity, 0
	}
	for _, a := range acts {
		a.rate, a.frozen = 0, false
		for _, r := range a.res {
			res[r].users++
		}
	}
	unfrozen := len(acts)
	level := 0.0
	for unfrozen > 0 {
		// The smallest rise that fills a resource or reaches a cap.
		step := math.Inf(1)
		for i := range res {
			if res[i].users > 0 {
				step = min(step, res[i].left/float64(res[i].users))
			}
		}
		for _, a := range acts {
			if !a.frozen {
				step = min(step, a.cap-level)
			}
		}
		if math.IsInf(step, 1) {
			step = 0 // an activity with neither a cap nor a resource: solve never makes one
		}
		level += step
		for i := range res {
			if res[i].users > 0 {
				res[i].left -= step * float64(res[i].users)
			}
		}
		// Freeze the activities at their cap or on a full resource.
		for _, a := range acts {
			if a.frozen {
				continue
			}
			full := !math.IsInf(a.cap, 1) && a.cap-level <= a.cap*1e-12
			for _, r := range a.res {
				if res[r].left <= res[r].capacity*1e-12 {
					full = true
				}
			}
			if full {
				a.frozen, a.rate = true, level
				unfrozen--
				for _, r := range a.res {
					res[r].users--
				}
			}
		}
	}
}
