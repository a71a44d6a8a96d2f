package bootstrap

import (
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

func TestFirstHost(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tb[1-4]", "tb1"},
		{"node[01-04,07],gpu3", "node01"},
		{"gpu3,node[1-2]", "gpu3"},
		{"rack[2-3]-n[08-09]", "rack2-n08"},
		{"node[7,1-3]", "node7"},
		{"  a b  c ", "a"},
		{"host.example.com", "host.example.com"},
		{"n_1", "n_1"},
		{"[3-4]x", "3x"},
		{"n[007]", "n007"},
	} {
		got, err := FirstHost(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("FirstHost(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestFirstHostErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no hosts"},
		{"   ", "no hosts"},
		{"a,,b", "empty host name"},
		{",a", "empty host name"},
		{"a,", "empty host name"},
		{"node[1-4", "missing ']'"},
		{"node1-4]", "unmatched ']'"},
		{"node[]", "want a number"},
		{"node[a-b]", "want a number"},
		{"node[1-]", "after '-'"},
		{"node[4-1]", "runs backwards"},
		{"node[1-2[3]]", "inside [ ]"},
		{"node[1,]", "want a number"},
		{"no/de", "invalid character"},
		{"node[99999999999999999999-1]", "out of bounds"},
	} {
		got, err := FirstHost(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.in) {
			t.Errorf("FirstHost(%q) = %q, %v; want an error naming the input and containing %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzFirstHost(f *testing.F) {
	for _, s := range []string{"tb[1-4]", "node[01-04,07],gpu3", "rack[2-3]-n[08-09]", "a b", "x[", "[1]", "a,,b", "n[9-1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		host, err := FirstHost(in)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		if host == "" || strings.ContainsAny(host, "[], \t\r\n") {
			t.Fatalf("FirstHost(%q) = %q: not a plain host name", in, host)
		}
		if again, err := FirstHost(host); err != nil || again != host {
			t.Fatalf("FirstHost(%q) = %q, but FirstHost(%q) = %q, %v", in, host, host, again, err)
		}
		if first := strings.FieldsFunc(in, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' || r == '\n' })[0]; !strings.Contains(in, "[") && host != first {
			t.Fatalf("FirstHost(%q) = %q, want the first name %q", in, host, first)
		}
	})
}

func TestTasksOnNode(t *testing.T) {
	for _, tc := range []struct {
		spec string
		node int
		want int
	}{
		{"2(x3),1", 0, 2},
		{"2(x3),1", 2, 2},
		{"2(x3),1", 3, 1},
		{"4", 0, 4},
		{"1,2,3", 2, 3},
	} {
		got, err := TasksOnNode(tc.spec, tc.node)
		if err != nil || got != tc.want {
			t.Errorf("TasksOnNode(%q, %d) = %d, %v; want %d", tc.spec, tc.node, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec string
		node int
		want string
	}{
		{"", 0, "empty"},
		{"2(x3),1", 4, "covers 4 nodes"},
		{"2(x3", 0, "want N or N(xM)"},
		{"2(3)", 0, "want N or N(xM)"},
		{"0", 0, "N, M >= 1"},
		{"2(x0)", 0, "N, M >= 1"},
		{"+2", 0, "N, M >= 1"},
		{"2,x", 0, "item \"x\""}, // later items are checked too
		{"1", -1, "negative"},
	} {
		if got, err := TasksOnNode(tc.spec, tc.node); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TasksOnNode(%q, %d) = %d, %v; want an error containing %q", tc.spec, tc.node, got, err, tc.want)
		}
	}
}

func FuzzTasksOnNode(f *testing.F) {
	f.Add("2(x3),1", 3)
	f.Add("1(x9223372036854775807),2", 5)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, spec string, node int) {
		n, err := TasksOnNode(spec, node)
		if err == nil && n < 1 {
			t.Fatalf("TasksOnNode(%q, %d) = %d, want >= 1", spec, node, n)
		}
	})
}
