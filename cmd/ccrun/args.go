package main

import (
	"strings"

	"github.com/spf13/pflag"
)

// singleDash maps the single-dash long options users type from mpirun and Hydra habit to
// ccrun's flags. pflag would read -np as -n p, so they are rewritten before parsing.
var singleDash = map[string]string{
	"-np": "--np", "-npernode": "--npernode", "-ppn": "--ppn",
	"-host": "--host", "-hosts": "--host", "-hostfile": "--hostfile", "-machinefile": "--machinefile",
	"-wdir": "--wdir", "-wd": "--wdir", "-oversubscribe": "--oversubscribe", "-timeout": "--timeout",
	"-tag-output": "--tag-output", "-output-filename": "--output-filename", "-map-by": "--map-by",
	"-display-map": "--display-map", "-preload-binary": "--preload-binary", "-prepend-rank": "--prepend-rank",
	// Hydra's environment flags; -envlist, -envall and -envnone are per executable in Hydra,
	// and ccrun runs one executable, so they mean the same as the global ones.
	"-genvlist": "--genvlist", "-genvall": "--genvall", "-genvnone": "--genvnone",
	"-envlist": "--genvlist", "-envall": "--genvall", "-envnone": "--genvnone",
}

// rewriteArgs turns mpirun-style options among ccrun's own into pflag's form and stops at
// the program name (or "--"): -np 4 -> --np 4, -genv K V and -genv K=V -> --env K=V (Hydra
// takes one argument when it holds '='; -env is the same for ccrun's single executable).
// Everything from the program name on is left exactly as given.
func rewriteArgs(args []string, fs *pflag.FlagSet) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-" || !strings.HasPrefix(a, "-"):
			return append(out, args[i:]...) // the program and its arguments
		case (a == "-genv" || a == "-env") && i+1 < len(args) && strings.Contains(args[i+1], "="):
			out = append(out, "--env", args[i+1])
			i++
			continue
		case (a == "-genv" || a == "-env") && i+2 < len(args):
			out = append(out, "--env", args[i+1]+"="+args[i+2])
			i += 2
			continue
		case a == "-genv" || a == "-env":
			return append(out, "--env") // pflag: flag needs an argument
		}
		name, value, hasValue := strings.Cut(a, "=")
		if long, ok := singleDash[name]; ok {
			name = long
			a = long
			if hasValue {
				a += "=" + value
			}
		}
		out = append(out, a)
		if takesNext(a, fs) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// takesNext reports whether flag argument a consumes the next argument as its value.
func takesNext(a string, fs *pflag.FlagSet) bool {
	if long, ok := strings.CutPrefix(a, "--"); ok {
		if strings.Contains(long, "=") {
			return false
		}
		f := fs.Lookup(long)
		return f != nil && f.NoOptDefVal == ""
	}
	// A cluster of shorthands, "-lx" or "-n4": the first one that takes a value takes the
	// rest of the cluster, or the next argument if nothing is left.
	cluster := a[1:]
	for i := 0; i < len(cluster); i++ {
		c := cluster[i]
		if c >= 0x80 {
			return false // not a shorthand (ShorthandLookup panics on it): pflag reports it
		}
		f := fs.ShorthandLookup(string(c))
		if f == nil {
			return false // unknown: pflag will report it
		}
		if f.NoOptDefVal == "" {
			return i == len(cluster)-1
		}
	}
	return false
}
