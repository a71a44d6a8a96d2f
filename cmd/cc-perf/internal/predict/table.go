package predict

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
)

// Describe is the header lines of a prediction: the cluster, the links,
// the constants and the model, each starting with "# ".
func (c *Config) Describe() []string {
	link := "unlimited (the calibration's transport alone)"
	if c.LinkRate > 0 {
		link = fmt.Sprintf("%s per host each way", rateString(c.LinkRate))
		if c.MTU > 0 {
			link += fmt.Sprintf(" (%s of TCP payload at MTU %d: headers and ACKs take %.1f%%)", rateString(c.payloadRate()), c.MTU, 100*(1-WireShare(c.MTU)))
		}
	}
	if c.Burst != nil {
		link += fmt.Sprintf(" with a %.0f-byte bucket spent at up to %s", c.Burst.Size, rateString(c.Burst.Peak))
	}
	if c.LinkLatency > 0 {
		link += fmt.Sprintf(", +%.1f us a hop", c.LinkLatency/1000)
	}
	cores := "a core per rank, shared by its lanes"
	switch {
	case c.SharedCores > 0:
		cores = fmt.Sprintf("%d core(s) shared by all hosts", c.SharedCores)
	case c.Cores > 0:
		cores = fmt.Sprintf("%d core(s) per host", c.Cores)
	}
	out := []string{
		fmt.Sprintf("# cc-perf predict %s: %d host(s) x %d rank(s), %s, %s", c.Coll.Name, c.Hosts, c.PPN, link, cores),
		fmt.Sprintf("# constants: %s", c.Consts.Source),
		"# model: timed replay of cc's own schedules (algos/sim/timed), 1 channel, float; exact unless a row says [folded] or [extrapolated]",
	}
	var what []string
	for _, h := range c.SlowHosts {
		what = append(what, fmt.Sprintf("host %d CPU x%g", h.Host, h.Factor))
	}
	for _, l := range c.SlowLinks {
		what = append(what, fmt.Sprintf("link %d-%d /%g", l.A, l.B, l.Factor))
	}
	for _, l := range c.LateStarts {
		what = append(what, fmt.Sprintf("rank %d +%.1f us", l.Rank, l.Ns/1000))
	}
	if f := c.Fabric; f != nil {
		what = append(what, fmt.Sprintf("leaf/spine %d hosts a leaf, %g:1", f.HostsPerLeaf, f.Oversub))
	}
	if len(what) > 0 {
		out = append(out, "# what-if: "+strings.Join(what, "; "))
	}
	for _, s := range c.Skipped {
		out = append(out, "# not replayed (above --max-transfers): "+s)
	}
	return out
}

func rateString(gbps float64) string {
	bits := gbps * 8e9
	switch {
	case bits >= 1e9:
		return fmt.Sprintf("%.4gGbit/s", bits/1e9)
	case bits >= 1e6:
		return fmt.Sprintf("%.4gMbit/s", bits/1e6)
	}
	return fmt.Sprintf("%.4gbit/s", bits)
}

// WriteText writes the prediction: the header, the nccl-tests table of
// the tuner's picks (the #wrong column reads "sim"; with algo, the -A
// columns), the tuner's closed form and the saturated resource beside
// each row, then the winner table.
func WriteText(w io.Writer, c *Config, rows []Row, algo bool) error {
	var b strings.Builder
	for _, l := range c.Describe() {
		b.WriteString(l + "\n")
	}
	root := -1
	if c.Coll.Rooted {
		root = c.Root
	}
	algoHead, algoUnit := "", ""
	if algo {
		algoHead, algoUnit = fmt.Sprintf("  %12s  %6s  %9s", "algo", "proto", "nchannels"), fmt.Sprintf("  %12s  %6s  %9s", "", "", "")
	}
	fmt.Fprintf(&b, "#\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s%s  %7s  %s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", algoHead, "tuner", "bottleneck")
	fmt.Fprintf(&b, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s%s  %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", algoUnit, "(us)")
	op := c.Coll.OpColumn("sum")
	for _, r := range rows {
		fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, "float", op, root)
		fmt.Fprintf(&b, "  %7s  %6s  %6s  %6s", report.Float(r.Pick.TimeUS, 7), report.Float(r.AlgBW, 6), report.Float(r.BusBW, 6), "sim")
		if algo {
			fmt.Fprintf(&b, "  %12s  %6s  %9d", r.Pick.Algo, r.Pick.Proto, 1)
		}
		fmt.Fprintf(&b, "  %7s  %s %.0f%%%s\n", report.Float(r.Pick.ClosedUS, 7), r.Pick.Bottleneck, 100*r.Pick.Busy, shortcut(r.Pick))
	}
	fmt.Fprintf(&b, "#\n# Fastest per size (replayed), runner-up, margin; tie: within %.0f%%\n", 100*TieMargin)
	fmt.Fprintf(&b, "# %10s  %-19s  %9s  %-19s  %9s  %7s\n", "size", "winner", "time(us)", "runner-up", "time(us)", "margin")
	for _, r := range rows {
		win := r.Entries[r.Best]
		next, nextT, margin := "-", "-", "-"
		if r.Next >= 0 {
			e := r.Entries[r.Next]
			next, nextT = e.Algo.String()+"/"+e.Proto.String(), report.Float(e.TimeUS, 9)
			margin = fmt.Sprintf("%.1f%%", 100*r.Margin())
			if r.Tie {
				margin += " tie"
			}
		}
		fmt.Fprintf(&b, "  %10d  %-19s  %9s  %-19s  %9s  %7s\n", r.Bytes, win.Algo.String()+"/"+win.Proto.String(), report.Float(win.TimeUS, 9), next, nextT, margin)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shortcut is the note of an entry replayed with a shortcut: how, and the
// bound of the error it adds.
func shortcut(e Entry) string {
	if e.Shortcut == "" {
		return ""
	}
	return fmt.Sprintf(" [%s; error within %s us]", e.Shortcut, strings.TrimSpace(report.Float(e.BoundUS, 9)))
}

// jsonEntry is one entry of -J.
type jsonEntry struct {
	Algo       string  `json:"algo"`
	Proto      string  `json:"proto"`
	TimeUS     float64 `json:"time_us"`
	ClosedUS   float64 `json:"tuner_closed_form_us"`
	Bottleneck string  `json:"bottleneck"`
	Busy       float64 `json:"bottleneck_busy"`
	Transfers  int64   `json:"slice_transfers"`
	Shortcut   string  `json:"shortcut,omitempty"`
	BoundUS    float64 `json:"shortcut_bound_us,omitempty"`
}

type jsonRow struct {
	Size      int64       `json:"size"`
	Count     int64       `json:"count"`
	Type      string      `json:"type"`
	TimeUS    float64     `json:"time"`
	AlgBW     float64     `json:"algbw"`
	BusBW     float64     `json:"busbw"`
	Predicted bool        `json:"predicted"`
	Pick      jsonEntry   `json:"pick"`
	Winner    string      `json:"winner"`
	Tie       bool        `json:"tie"`
	Entries   []jsonEntry `json:"entries"`
}

type jsonDoc struct {
	Header []string  `json:"header"`
	Rows   []jsonRow `json:"results"`
}

func entryJSON(e Entry) jsonEntry {
	return jsonEntry{Algo: e.Algo.String(), Proto: e.Proto.String(), TimeUS: e.TimeUS, ClosedUS: e.ClosedUS,
		Bottleneck: e.Bottleneck, Busy: e.Busy, Transfers: e.Transfers, Shortcut: e.Shortcut, BoundUS: e.BoundUS}
}

// WriteJSON writes the prediction as one JSON document: the header lines
// and, per size, the pick's time, algbw and busbw under nccl-tests' names,
// "predicted": true, and every entry replayed.
func WriteJSON(w io.Writer, c *Config, rows []Row) error {
	doc := jsonDoc{Header: c.Describe(), Rows: []jsonRow{}}
	for _, r := range rows {
		jr := jsonRow{Size: r.Bytes, Count: r.Count, Type: "float", TimeUS: r.Pick.TimeUS, AlgBW: r.AlgBW, BusBW: r.BusBW,
			Predicted: true, Pick: entryJSON(r.Pick), Tie: r.Tie}
		win := r.Entries[r.Best]
		jr.Winner = win.Algo.String() + "/" + win.Proto.String()
		for _, e := range r.Entries {
			jr.Entries = append(jr.Entries, entryJSON(e))
		}
		doc.Rows = append(doc.Rows, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
