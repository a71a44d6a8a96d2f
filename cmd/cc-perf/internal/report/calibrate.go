package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// CalibrationHeader is what the lines above the cc-perf calibrate table
// say.
type CalibrationHeader struct {
	NRanks, NHosts int
	Colls          []string // the collectives measured
	Channels       []int
	MinBytes       int64
	MaxBytes       int64
	Factor         int64
	Reps, Iters    int
	Base           string // the base constants' source
	// Samples are the measurements the fit used, with the model's
	// predictions; with Detail, a table lists them all.
	Samples []Predicted
	Detail  bool
	// SharedCores, when not 0, says the run fitted alpha_cpu alone
	// (tune.FitCPU) with the job's ranks on that many shared cores.
	SharedCores int
}

// Predicted is a calibration measurement and the model's predictions for
// it with the base and with the fitted constants, µs.
type Predicted struct {
	tune.Sample
	Before, After float64
}

// BadFit is the model error (median relative error) above which the
// calibration report warns that the constants are not to be trusted.
const BadFit = 0.35

// WriteCalibration writes the calibration report: header lines, a table
// of the fitted class's constants before and after with what each rests
// on (tablewriter), and the model's error before and after. Lines other
// than the table's start with '#'.
func WriteCalibration(w io.Writer, h CalibrationHeader, f *tune.Fitted) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# cc-perf calibrate: %d ranks on %s: link class %s\n", h.NRanks, plural(h.NHosts, "host"), f.Class)
	chs := make([]string, len(h.Channels))
	for i, c := range h.Channels {
		chs[i] = strconv.Itoa(c)
	}
	fmt.Fprintf(&b, "# measured: %s; every entry on %s channel(s); %d..%d B (x%d); %s of %s each, interleaved\n",
		strings.Join(h.Colls, ", "), strings.Join(chs, " and "), h.MinBytes, h.MaxBytes, h.Factor,
		plural(h.Reps, "repetition"), plural(h.Iters, "iteration"))
	fmt.Fprintf(&b, "# base: %s\n#\n", h.Base)

	// Each row: the constant's name in Fitted.Basis, its unit, and where
	// it sits in a class's constants.
	type row struct {
		name, unit string
		get        func(k *tune.ClassConsts) float64
	}
	var rows []row
	type perProto = func(k *tune.ClassConsts) *[protocols.NumProtos]float64
	type table = struct {
		name, unit string
		get        perProto
	}
	alphaCPU := table{"alpha_cpu", "us", func(k *tune.ClassConsts) *[protocols.NumProtos]float64 { return &k.AlphaCPU }}
	tables := []table{
		{"gamma", "us", func(k *tune.ClassConsts) *[protocols.NumProtos]float64 { return &k.Gamma }},
		{"alpha", "us", func(k *tune.ClassConsts) *[protocols.NumProtos]float64 { return &k.Alpha }},
		{"beta", "GB/s", func(k *tune.ClassConsts) *[protocols.NumProtos]float64 { return &k.Beta }},
		{"beta_max", "GB/s", func(k *tune.ClassConsts) *[protocols.NumProtos]float64 { return &k.BetaMax }},
	}
	switch {
	case h.SharedCores > 0:
		tables = []table{tables[1], alphaCPU}
	case f.Old.AlphaCPU != f.New.AlphaCPU || f.New.AlphaCPU != ([protocols.NumProtos]float64{}):
		tables = slices.Insert(tables, 2, alphaCPU)
	}
	for _, t := range tables {
		for p := range protocols.Proto(protocols.NumProtos) {
			rows = append(rows, row{t.name + " " + p.String(), t.unit, func(k *tune.ClassConsts) float64 { return t.get(k)[p] }})
		}
	}
	for a := range algos.Algo(algos.NumAlgos) {
		if h.SharedCores > 0 {
			break
		}
		if a == algos.Ring || (f.Old.Eff[a] == 0 && f.New.Eff[a] == 0) {
			continue
		}
		rows = append(rows, row{"efficiency " + a.String(), "", func(k *tune.ClassConsts) float64 { return k.Eff[a] }})
		switch {
		case a == algos.PAT:
			rows = append(rows, row{"op_cost", "us", func(k *tune.ClassConsts) float64 { return k.OpCost }})
		case f.Old.AlgoGamma[a] != 0: // its own per-call cost, fitted in place of algo_lat
			rows = append(rows, row{"algo_gamma " + a.String(), "us", func(k *tune.ClassConsts) float64 { return k.AlgoGamma[a] }})
		default:
			rows = append(rows, row{"algo_lat " + a.String(), "us", func(k *tune.ClassConsts) float64 { return k.AlgoLat[a] }})
		}
		if f.Old.MaxBytes[a] != 0 {
			rows = append(rows, row{"max_bytes " + a.String(), "B", func(k *tune.ClassConsts) float64 { return k.MaxBytes[a] }})
		}
	}
	err := writeTable(&b, []string{"constant", "unit", "before", "after", "basis"}, "LLRRL", func(add func(...string)) {
		for _, r := range rows {
			show := num
			if r.unit == "B" { // a size, in whole bytes
				show = func(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
			}
			add(r.name, r.unit, show(r.get(&f.Old)), show(r.get(&f.New)), f.Basis[r.name])
		}
	})
	if err != nil {
		return err
	}
	if h.Detail {
		b.WriteString("#\n")
		err := writeTable(&b, []string{"collective", "entry", "size (B)", "time (us)", "base model", "fitted"}, "LLRRRR", func(add func(...string)) {
			for _, s := range h.Samples {
				add(s.Coll.String(), fmt.Sprintf("%s/%s/%d", s.Algo, s.Proto, s.Channels), strconv.FormatInt(s.Bytes, 10),
					usStr(s.TimeUS), usStr(s.Before), usStr(s.After))
			}
		})
		if err != nil {
			return err
		}
	}
	if h.SharedCores > 0 {
		fmt.Fprintf(&b, "#\n# %d ranks on %d shared cores: the base's model is %.0f%% off (median) over %d measurements; alpha_cpu is what cc-perf predict --shared-cores charges to the cores per step (the tuner does not read it)\n",
			h.NRanks, h.SharedCores, 100*f.ErrBefore, len(h.Samples))
	} else {
		fmt.Fprintf(&b, "#\n# model error, median |predicted / measured - 1| over %d measurements: %.0f%% with the base constants, %.0f%% fitted\n",
			len(h.Samples), 100*f.ErrBefore, 100*f.ErrAfter)
	}
	if h.SharedCores == 0 && f.ErrAfter > BadFit {
		fmt.Fprintf(&b, "# warning: the fitted model is more than %.0f%% off for half the measurements: the machine was busy, or the model does not fit it; measure again (more --reps) before using the constants\n", 100*BadFit)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// num prints a constant with three significant digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }
