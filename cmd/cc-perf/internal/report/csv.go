package report

import (
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// CSVHeader is the first line of the -Z csv file: rccl-tests' columns, with
// the "nodes" column its rows carry but its header forgets.
const CSVHeader = "collective, nodes, ranks, rankspernode, gpusperrank, size, type, redop, inplace, time, algbw, busbw, #wrong\n"

// CSV builds the rccl-tests CSV: one line per half row, fields joined with
// ", ", doubles printed like C++'s std::to_string (%f, so "nan", "inf" and
// "-inf" when not finite), #wrong "N/A" when not checked.
type CSV struct {
	Collective   string // e.g. "all_reduce"
	Nodes        int    // distinct hosts
	Ranks        int    // total ranks
	RanksPerNode int    // the most ranks on one host
	GpusPerRank  int    // -g
	b            strings.Builder
}

// Row records both halves of a row.
func (c *CSV) Row(r bench.Result) {
	for i, h := range []bench.Half{r.OutOfPlace, r.InPlace} {
		wrong := "N/A"
		if h.Checked {
			wrong = strconv.FormatInt(h.Wrong, 10)
		}
		fields := []string{
			c.Collective, strconv.Itoa(c.Nodes), strconv.Itoa(c.Ranks), strconv.Itoa(c.RanksPerNode), strconv.Itoa(c.GpusPerRank),
			strconv.FormatInt(r.Bytes, 10), r.Type, r.RedOp, strconv.Itoa(i),
			cDouble(h.TimeUS), cDouble(h.AlgBW), cDouble(h.BusBW), wrong,
		}
		c.b.WriteString(strings.Join(fields, ", "))
		c.b.WriteString("\n")
	}
}

// Bytes returns the header and every row recorded.
func (c *CSV) Bytes() []byte { return []byte(CSVHeader + c.b.String()) }
