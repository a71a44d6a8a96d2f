package fabric

import "math/rand/v2"

// The schedules: which hosts meet in which round. Each returns its rounds
// as lists of tests over host indices 0..n-1; no host is in two tests of a
// round, except in Shift, where a host sends once and receives once.

// Neighbor is quick mode's neighbour ring, as NCCL 2.31's network check
// pairs hosts: even positions with their right neighbour, then odd ones,
// then (odd n) the pair that closes the ring.
//
//	n = 6: round 0  0-1  2-3  4-5      n = 5: round 0  0-1  2-3
//	       round 1  1-2  3-4  5-0             round 1  1-2  3-4
//	                                          round 2  4-0
//
// Every host meets its two ring neighbours, so each has two distinct
// partners (one when n = 2, the only pair).
func Neighbor(n int) [][]Test {
	if n < 2 {
		return nil
	}
	if n == 2 {
		return [][]Test{{{A: 0, B: 1}}}
	}
	var even, odd []Test
	for i := 0; i+1 < n; i += 2 {
		even = append(even, Test{A: i, B: i + 1})
	}
	for i := 1; i+1 < n; i += 2 {
		odd = append(odd, Test{A: i, B: i + 1})
	}
	closing := Test{A: n - 1, B: 0}
	if n%2 == 0 {
		return [][]Test{even, append(odd, closing)}
	}
	return [][]Test{even, odd, {closing}}
}

// Circle is full mode's round-robin tournament by the circle method
// (SuperBench's pair-wise pattern): host 0 stays put, the others rotate one
// place per round, and position i meets position m-1-i.
//
//	n = 4:  0 1      0 3      0 2
//	        3 2      2 1      1 3
//
// Every unordered pair meets exactly once, in n-1 rounds for even n; an odd
// n gets a bye (a phantom host n) and n rounds, each with one host idle.
func Circle(n int) [][]Test {
	if n < 2 {
		return nil
	}
	m := n + n%2 // with the bye
	pos := make([]int, m)
	for i := range pos {
		pos[i] = i
	}
	rounds := make([][]Test, 0, m-1)
	for range m - 1 {
		var r []Test
		for i := range m / 2 {
			a, b := pos[i], pos[m-1-i]
			if a == n || b == n {
				continue // the bye
			}
			r = append(r, Test{A: min(a, b), B: max(a, b)})
		}
		rounds = append(rounds, r)
		// rotate pos[1:] one place to the right
		last := pos[m-1]
		copy(pos[2:], pos[1:m-1])
		pos[1] = last
	}
	return rounds
}

// Shift is directed mode's shifted ring (IBM Autopilot's ring workload):
// round t-1 has every host i send to i+t mod n, for t = 1..n-1, so every
// ordered pair is measured once and in each round every host sends one
// stream and receives one. A host's sending tests give its transmit
// score, its receiving tests its receive score.
func Shift(n int) [][]Test {
	if n < 2 {
		return nil
	}
	rounds := make([][]Test, 0, n-1)
	for t := 1; t < n; t++ {
		r := make([]Test, n)
		for i := range n {
			r[i] = Test{A: i, B: (i + t) % n, Dir: true}
		}
		rounds = append(rounds, r)
	}
	return rounds
}

// Random is random mode (Google's cluster health scanner pairs the same
// way): each round shuffles the hosts and pairs them in order, one host
// idle when n is odd. The same seed gives the same rounds in every
// version: the shuffle is Fisher-Yates written here over PCG's raw
// output, which math/rand/v2 fixes (its Shuffle is not promised to stay
// the same). Taking the output modulo i+1 biases a draw by at most
// n/2^64.
func Random(n, rounds int, seed int64) [][]Test {
	if n < 2 {
		return nil
	}
	pcg := rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)
	out := make([][]Test, 0, rounds)
	perm := make([]int, n)
	for range rounds {
		for i := range perm {
			perm[i] = i
		}
		for i := n - 1; i > 0; i-- {
			j := int(pcg.Uint64() % uint64(i+1))
			perm[i], perm[j] = perm[j], perm[i]
		}
		r := make([]Test, 0, n/2)
		for i := 0; i+1 < n; i += 2 {
			a, b := perm[i], perm[i+1]
			r = append(r, Test{A: min(a, b), B: max(a, b)})
		}
		out = append(out, r)
	}
	return out
}

// Halves cuts a bisection group in two: the first ceil(n/2) hosts and the
// rest, as new slices.
func Halves(hosts []int) (a, b []int) {
	h := (len(hosts) + 1) / 2
	return append([]int(nil), hosts[:h]...), append([]int(nil), hosts[h:]...)
}

// SplitRound cuts a round into sub-rounds of at most k tests each
// (--max-concurrent k), in order; every sub-round keeps r's Index and
// Phase. k <= 0, or a round of at most k tests, gives r alone.
func SplitRound(r Round, k int) []Round {
	if k <= 0 || len(r.Tests) <= k {
		return []Round{r}
	}
	var out []Round
	for i := 0; i < len(r.Tests); i += k {
		j := min(i+k, len(r.Tests))
		out = append(out, Round{Index: r.Index, Phase: r.Phase, Tests: r.Tests[i:j:j]})
	}
	return out
}
