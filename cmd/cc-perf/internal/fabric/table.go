package fabric

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// MatrixMax is the largest host count whose ratio matrix WriteTable
// prints.
const MatrixMax = 32

// WriteTable writes the human report: the host table worst first, the
// links, the reference, the ratio matrix (at most MatrixMax hosts) and the
// one-line summary. Every line but the host rows starts with '#', as in
// cc-perf's other tables. The elapsed time is the runner's to print.
//
//	#  host  addr        tests  GB/s  ratio   modz  slow  lat us  ratio  verdict
//	   tb5   10.252.0.5    7/7  0.12   0.15   -7.6   7/7     118   1.02  slow-host
func WriteTable(w io.Writer, hosts []Host, ms []Measurement, v Verdict) error {
	var b strings.Builder
	writeHosts(&b, v)
	writeLinks(&b, v)
	writeReference(&b, v)
	if len(hosts) <= MatrixMax {
		writeMatrix(&b, hosts, ms, v)
	}
	fmt.Fprintf(&b, "#  verdict: %s\n", v.Summary)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHosts writes the host table.
func writeHosts(b *strings.Builder, v Verdict) {
	directed := false
	hw, aw := len("host"), len("addr")
	for _, h := range v.Hosts {
		hw, aw = max(hw, len(h.Host)), max(aw, len(h.Addr))
		directed = directed || h.Tx != nil || h.Rx != nil
	}
	fmt.Fprintf(b, "#  %-*s  %-*s  %5s  %8s  %5s  %6s  %5s", hw, "host", aw, "addr", "tests", "med GB/s", "ratio", "modz", "slow")
	if directed {
		fmt.Fprintf(b, "  %5s  %5s", "tx", "rx")
	}
	fmt.Fprintf(b, "  %7s  %5s  %s\n", "lat us", "ratio", "verdict")
	for _, h := range v.Hosts {
		addr := h.Addr
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(b, "   %-*s  %-*s", hw, h.Host, aw, addr)
		if h.Index < 0 {
			fmt.Fprintf(b, "  %5s  %8s  %5s  %6s  %5s", "-", "-", "-", "-", "-")
			if directed {
				fmt.Fprintf(b, "  %5s  %5s", "-", "-")
			}
			fmt.Fprintf(b, "  %7s  %5s  %s\n", "-", "-", h.Verdict)
			continue
		}
		fmt.Fprintf(b, "  %5s  %8s  %5s  %6s  %5s",
			fmt.Sprintf("%d/%d", h.Measured, h.Tests), fixed(h.GBps, h.Measured > 0, 2),
			fixed(h.Score, h.Measured > 0, 2), fixed(h.ModZ, h.Measured > 0, 1), fmt.Sprintf("%d/%d", h.Slow, h.Tests))
		if directed {
			fmt.Fprintf(b, "  %5s  %5s", optional(h.Tx), optional(h.Rx))
		}
		fmt.Fprintf(b, "  %7s  %5s  %s\n", fixed(h.LatUS, h.LatUS > 0, 0), fixed(h.LatRatio, h.LatRatio > 0, 2), h.Verdict)
	}
}

// fixed is x with prec decimals, or "-" when not known.
func fixed(x float64, known bool, prec int) string {
	if !known {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

func optional(x *float64) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *x)
}

// writeLinks writes the links line.
func writeLinks(b *strings.Builder, v Verdict) {
	if len(v.Links) == 0 {
		b.WriteString("#  links: none slow between passing hosts\n")
		return
	}
	var parts []string
	for _, l := range v.Links {
		s := fmt.Sprintf("%s %.2f z %.1f %s", linkName(l), l.Ratio, l.ModZ, l.Verdict)
		switch {
		case l.Confirmed:
			s += " (confirmed by a retest)"
		case l.Retested:
			s += " (passed its retest)"
		}
		parts = append(parts, s)
	}
	fmt.Fprintf(b, "#  links: %s\n", strings.Join(parts, ";  "))
}

// writeReference writes the reference and noise lines.
func writeReference(b *strings.Builder, v Verdict) {
	r := v.Reference
	what := map[string]string{"baseline": "baseline", "expect": "--expect", "fleet": "fleet median"}
	fmt.Fprintf(b, "#  reference: %s %.3g GB/s at %s", what[r.Source], r.GBps, sizeName(r.Size))
	if r.LatUS > 0 {
		fmt.Fprintf(b, ", latency %s %.3g us at %s", what[r.LatSource], r.LatUS, sizeName(r.LatSize))
	}
	if v.Degraded || v.LatDegraded {
		fmt.Fprintf(b, " (degraded: hosts judged against the fleet's median %.3g GB/s)", v.RatioOf)
	}
	fmt.Fprintf(b, ";  noise %.2f\n", v.Noise)
	if v.Noisy {
		fmt.Fprintf(b, "# WARNING noisy run: noise %.2f > tolerance/2 %.2f: accusations near the gates are inconclusive; try --max-concurrent 1 or a longer --pair-time\n",
			v.Noise, v.Tolerance/2)
	}
}

// sizeName prints a byte count the way --size takes it.
func sizeName(n int64) string {
	for _, u := range []struct {
		s string
		b int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.b && n%u.b == 0 {
			return fmt.Sprintf("%d%s", n/u.b, u.s)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// Cell is one cell of the ratio matrix: row host against column host
// (row sends to column in directed tests).
type Cell struct {
	Ratio    float64 // the median ratio over the cell's passing tests; NaN without one
	Tests    int     // tests of the pair
	Timeouts int     // of them timed out
	Errors   int     // of them ended in an error
}

// Mark is what the cell shows: "-" on the diagonal (i == j), "" never
// measured, "E" an error, "T" every test timed out, the ratio when slow
// (below 1 - tolerance, or some tests timed out), "." otherwise.
func (c Cell) Mark(i, j int, tolerance float64) string {
	switch {
	case i == j:
		return "-"
	case c.Tests == 0:
		return ""
	case c.Errors > 0:
		return "E"
	case c.Timeouts == c.Tests:
		return "T"
	case c.Timeouts > 0 || c.Ratio < 1-tolerance:
		return fmt.Sprintf("%.2f", num(c.Ratio))
	case !math.IsNaN(c.Ratio):
		return "."
	}
	return ""
}

// Matrix is the ratio matrix of hosts from ms: cell [i][j] is host i
// against host j, the bandwidth ratios to v.RatioOf.
func Matrix(hosts []Host, ms []Measurement, v Verdict) [][]Cell {
	n := len(hosts)
	ratios := make([][][]float64, n)
	cells := make([][]Cell, n)
	for i := range cells {
		cells[i], ratios[i] = make([]Cell, n), make([][]float64, n)
	}
	for _, m := range ms {
		if m.Group != nil || m.A < 0 || m.B < 0 || m.A >= n || m.B >= n || m.A == m.B {
			continue
		}
		pairs := [][2]int{{m.A, m.B}}
		if !m.Dir {
			pairs = append(pairs, [2]int{m.B, m.A})
		}
		for _, p := range pairs {
			c := &cells[p[0]][p[1]]
			c.Tests++
			switch m.Status {
			case StatusOK:
				if v.RatioOf > 0 {
					ratios[p[0]][p[1]] = append(ratios[p[0]][p[1]], m.GBps/v.RatioOf)
				}
			case StatusTimeout:
				c.Timeouts++
			default:
				c.Errors++
			}
		}
	}
	for i := range cells {
		for j := range cells[i] {
			cells[i][j].Ratio = median(ratios[i][j])
		}
	}
	return cells
}

// writeMatrix writes the ratio matrix (Matrix, each cell's Mark).
func writeMatrix(b *strings.Builder, hosts []Host, ms []Measurement, v Verdict) {
	n := len(hosts)
	if n == 0 {
		return
	}
	w := 4
	for _, h := range hosts {
		w = max(w, len(h.Name))
	}
	cells := Matrix(hosts, ms, v)
	fmt.Fprintf(b, "#  ratio matrix (row %s column; '.' ok, a number: slow, T timed out, E error, blank: not measured)\n",
		map[bool]string{true: "sends to", false: "with"}[v.Schedule == "directed"])
	fmt.Fprintf(b, "#  %*s", w, "")
	for _, h := range hosts {
		fmt.Fprintf(b, " %*s", w, h.Name)
	}
	b.WriteByte('\n')
	for i, h := range hosts {
		fmt.Fprintf(b, "#  %*s", w, h.Name)
		for j := range hosts {
			fmt.Fprintf(b, " %*s", w, cells[i][j].Mark(i, j, v.Tolerance))
		}
		b.WriteString("\n")
	}
}

// ProgressLine is one line for stderr about round r, from ms, every
// measurement so far: its tests with their bandwidth, '!' after a test
// below (1-tolerance) of the median of every pair test so far (a hint at
// the default tolerance; the verdict is the judge's), "timeout!" or
// "error!" for the tests that did not finish.
//
//	# round 3 schedule tb1-tb2 0.79  tb5-tb6 0.12!  tb3-tb4 0.81
func ProgressLine(hosts []Host, r Round, ms []Measurement) string {
	var all []float64
	for _, m := range ms {
		if m.Group == nil && m.Status == StatusOK {
			all = append(all, m.GBps)
		}
	}
	gate := (1 - DefaultConfig().Tolerance) * median(all)
	name := func(i int) string {
		if i >= 0 && i < len(hosts) {
			return hosts[i].Name
		}
		return fmt.Sprint(i)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# round %d %s", r.Index, r.Phase)
	for _, m := range ms {
		if m.Round != r.Index {
			continue
		}
		var who string
		switch {
		case m.Group != nil:
			who = fmt.Sprintf("%s..%s/%d", name(m.Group[0]), name(m.Group[len(m.Group)-1]), len(m.Group))
		case m.Dir:
			who = name(m.A) + ">" + name(m.B)
		default:
			who = name(m.A) + "-" + name(m.B)
		}
		switch {
		case m.Status != StatusOK:
			fmt.Fprintf(&b, "  %s %s!", who, m.Status)
		case m.Group == nil && m.GBps < gate:
			fmt.Fprintf(&b, "  %s %.2f!", who, m.GBps)
		default:
			fmt.Fprintf(&b, "  %s %.2f", who, m.GBps)
		}
	}
	return b.String()
}
