package fabric

import (
	"encoding/json"
	"fmt"
	"strings"
)

// RecordVersion is the version of the -J document Record writes.
const RecordVersion = 1

// Record is the -J JSON document of a fabric run. The runner rewrites the
// file (atomically, by rename) after each round from Marshal, so whenever
// the run dies the file holds every finished round; Verdict and Summary
// appear once the run is judged.
type Record struct {
	Version     int           `json:"version"`
	CCVersion   string        `json:"cc_version"`
	Started     string        `json:"started"` // RFC 3339, set by the runner
	Args        []string      `json:"args"`
	Config      Config        `json:"config"` // Seed included
	Hosts       []Host        `json:"hosts"`  // in rank order, with boot ids
	Unreachable []string      `json:"unreachable"`
	Reference   *Reference    `json:"reference,omitempty"`
	Rounds      []RecordRound `json:"rounds"`
	Counters    []Counters    `json:"counters,omitempty"`
	Verdict     *Verdict      `json:"verdict,omitempty"`
	Summary     *Summary      `json:"summary,omitempty"`
}

// RecordRound is one round and what its tests measured.
type RecordRound struct {
	Index int           `json:"i"`
	Phase Phase         `json:"phase"`
	Tests []Test        `json:"tests"`
	Pairs []Measurement `json:"pairs"`
}

// Summary is the end of a judged run.
type Summary struct {
	Verdict     string   `json:"verdict"` // Verdict.Summary
	Fail        bool     `json:"fail"`
	Flagged     []string `json:"flagged"`
	Unreachable []string `json:"unreachable"`
	Noise       float64  `json:"noise"`
	ElapsedS    float64  `json:"elapsed_s"`
}

// Add records round r (or one of its sub-rounds) and its measurements;
// sub-rounds of one round (same Index) are merged.
func (rec *Record) Add(r Round, ms []Measurement) {
	if n := len(rec.Rounds); n > 0 && rec.Rounds[n-1].Index == r.Index {
		last := &rec.Rounds[n-1]
		last.Tests = append(last.Tests, r.Tests...)
		last.Pairs = append(last.Pairs, ms...)
		return
	}
	rec.Rounds = append(rec.Rounds, RecordRound{
		Index: r.Index, Phase: r.Phase,
		Tests: append([]Test(nil), r.Tests...), Pairs: append([]Measurement(nil), ms...),
	})
}

// Finish records the verdict and the run's elapsed seconds.
func (rec *Record) Finish(v Verdict, elapsedS float64) {
	ref := v.Reference
	rec.Reference, rec.Verdict = &ref, &v
	rec.Summary = &Summary{
		Verdict: v.Summary, Fail: v.Fail, Flagged: v.Flagged,
		Unreachable: rec.Unreachable, Noise: v.Noise, ElapsedS: elapsedS,
	}
}

// Marshal is the document: indented JSON, lists that are empty written as
// [] rather than null, and a final newline.
func (rec *Record) Marshal() ([]byte, error) {
	c := *rec
	c.Args, c.Hosts, c.Unreachable, c.Rounds = orEmpty(c.Args), orEmpty(c.Hosts), orEmpty(c.Unreachable), orEmpty(c.Rounds)
	if c.Summary != nil {
		s := *c.Summary
		s.Flagged, s.Unreachable = orEmpty(s.Flagged), orEmpty(s.Unreachable)
		c.Summary = &s
	}
	if c.Verdict != nil {
		v := *c.Verdict
		v.Hosts, v.Links, v.Flagged, v.Inconclusive = orEmpty(v.Hosts), orEmpty(v.Links), orEmpty(v.Flagged), orEmpty(v.Inconclusive)
		c.Verdict = &v
	}
	out, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return nil, fmt.Errorf("fabric record: %w", err)
	}
	return append(out, '\n'), nil
}

// orEmpty is s, or an empty slice for nil (JSON [] rather than null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ExcludeList is --exclude-file's contents: the flagged hosts, unreachable
// ones included, one name per line, as sbatch --exclude and ccrun read them.
func ExcludeList(v Verdict) []byte {
	var b strings.Builder
	for _, h := range v.Flagged {
		b.WriteString(h + "\n")
	}
	return []byte(b.String())
}

// GoodHostfile is --good-hostfile's contents: an Open MPI hostfile of the
// hosts whose verdict is ok, one "name slots=1" line each in rank order (a
// fabric run has one rank per host). Inconclusive hosts are left out and
// named in a comment.
func GoodHostfile(hosts []Host, v Verdict) []byte {
	verdict := map[string]string{}
	for _, h := range v.Hosts {
		verdict[h.Host] = h.Verdict
	}
	var b strings.Builder
	b.WriteString("# cc-perf fabric: the hosts that passed\n")
	var unsure []string
	for _, h := range hosts {
		switch verdict[h.Name] {
		case VerdictOK:
			fmt.Fprintf(&b, "%s slots=1\n", h.Name)
		case VerdictInconclusive:
			unsure = append(unsure, h.Name)
		}
	}
	if len(unsure) > 0 {
		fmt.Fprintf(&b, "# left out, inconclusive (noisy run): %s\n", strings.Join(unsure, " "))
	}
	return []byte(b.String())
}
