package launch

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestParseStdinTarget(t *testing.T) {
	tests := []struct {
		in   string
		want StdinTarget
		err  string
	}{
		{"0", 0, ""}, {"7", 7, ""}, {"all", StdinAll, ""}, {"none", StdinNone, ""},
		{"-1", 0, `bad --stdin "-1": want all, none or a rank number (0 is the default)`},
		{"ALL", 0, `bad --stdin "ALL": want all, none or a rank number (0 is the default)`},
		{"", 0, `bad --stdin "": want all, none or a rank number (0 is the default)`},
	}
	for _, tt := range tests {
		got, err := ParseStdinTarget(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseStdinTarget(%q) = %v, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.in {
			t.Errorf("ParseStdinTarget(%q) = %v (%q), %v; want %v", tt.in, got, got.String(), err, tt.want)
		}
	}
}

// TestRunStdin: ccrun's stdin reaches the ranks --stdin names, through real processes;
// a rank that ends without reading does not hold up the others.
func TestRunStdin(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 1<<16) // 1 MiB: more than a pipe holds
	tests := []struct {
		to     StdinTarget
		script string
		want   []string // rank r's output line
	}{
		{0, `echo "$CC_RANK $(wc -c)"`, []string{"0 1114112", "1 0", "2 0"}},
		{StdinAll, `echo "$CC_RANK $(wc -c)"`, []string{"0 1114112", "1 1114112", "2 1114112"}},
		{StdinAll, `[ "$CC_RANK" = 1 ] && exit 0; echo "$CC_RANK $(wc -c)"`, []string{"0 1114112", "", "2 1114112"}},
		{2, `echo "$CC_RANK $(wc -c)"`, []string{"0 0", "1 0", "2 1114112"}},
		{StdinNone, `echo "$CC_RANK $(wc -c)"`, []string{"0 0", "1 0", "2 0"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%s", tt.to, tt.script), func(t *testing.T) {
			o, out, errb := localJob(3, tt.script)
			o.Stdin, o.StdinTo = strings.NewReader(big), tt.to
			rep, err := Run(context.Background(), o)
			if err != nil || rep.ExitCode() != 0 {
				t.Fatalf("Run: %v, exit %d; stderr:\n%s", err, rep.ExitCode(), errb)
			}
			for r, w := range tt.want {
				if w != "" && !strings.Contains(out.String(), w+"\n") {
					t.Errorf("rank %d: no line %q in:\n%s", r, w, out)
				}
			}
		})
	}
	o, _, _ := localJob(3, "true")
	o.Stdin, o.StdinTo = strings.NewReader(""), 3
	if _, err := Run(context.Background(), o); err == nil || err.Error() != "bad --stdin 3: the job has 3 rank(s), 0-2" {
		t.Errorf("--stdin 3 of 3 ranks: %v", err)
	}
}
