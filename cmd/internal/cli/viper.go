package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// NewViper returns a fresh viper instance (never the global one) holding every
// environment entry whose name starts with prefix+"_", keyed by the rest of the
// name in lower case: with prefix "CC_PERF", CC_PERF_WARMUP_ITERS=5 becomes key
// "warmup_iters". environ is injected so tests need not touch the process
// environment.
func NewViper(prefix string, environ []string) *viper.Viper {
	v := viper.New()
	p := prefix + "_"
	m := map[string]any{}
	for _, kv := range environ {
		k, val, ok := cutEnv(kv)
		if !ok || !strings.HasPrefix(k, p) || len(k) == len(p) {
			continue
		}
		m[strings.ToLower(k[len(p):])] = val
	}
	// MergeConfigMap only fails for nested maps, which m never holds.
	_ = v.MergeConfigMap(m)
	return v
}

// EnvName is the environment variable that fills flag name: prefix, "_", and
// the flag name in upper case with '-' as '_' (minbytes -> CC_PERF_MINBYTES,
// legacy-format -> CC_PERF_LEGACY_FORMAT).
func EnvName(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// BindFlags copies into every flag of fs that the command line did not set the
// value v holds for it (see [NewViper] and [EnvName]), parsing it exactly as
// the flag would. "help" is never filled. An unparsable value is an error
// naming the variable, its value and the flag's own complaint.
func BindFlags(fs *pflag.FlagSet, v *viper.Viper, prefix string) error {
	var first error
	fs.VisitAll(func(f *pflag.Flag) {
		if first != nil || f.Changed || f.Name == "help" {
			return
		}
		key := strings.ToLower(strings.ReplaceAll(f.Name, "-", "_"))
		if !v.IsSet(key) {
			return
		}
		val := v.GetString(key)
		if err := f.Value.Set(val); err != nil {
			first = fmt.Errorf("%s=%q (for --%s): %w", EnvName(prefix, f.Name), val, f.Name, err)
			return
		}
		f.Changed = true
	})
	return first
}
