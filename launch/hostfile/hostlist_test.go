package hostfile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		in   string
		want string // space-separated
	}{
		{"node01", "node01"},
		{"node[01-04,07]", "node01 node02 node03 node04 node07"},
		{"tux[0-2],login", "tux0 tux1 tux2 login"},
		{"node1,node[2-3,12]", "node1 node2 node3 node12"},
		{"a b\tc", "a b c"},
		{"n[8-10]", "n8 n9 n10"},
		{"n[08-10]", "n08 n09 n10"},
		{"n[001-2]", "n001 n002"},
		{"rack[1-2]-n[1-2]", "rack1-n1 rack1-n2 rack2-n1 rack2-n2"},
		{"[1-2]x", "1x 2x"},
		{"n[3]", "n3"},
		{"n[5,5]", "n5 n5"},
		{"tb[1-4]", "tb1 tb2 tb3 tb4"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in)
		if err != nil {
			t.Errorf("Expand(%q): %v", tt.in, err)
			continue
		}
		if d := cmp.Diff(strings.Fields(tt.want), got); d != "" {
			t.Errorf("Expand(%q) (-want +got):\n%s", tt.in, d)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `hostlist "": no hosts`},
		{"n[1-", `unclosed '[' in "n[1-"`},
		{"n1]", `unmatched ']' at offset 2 in "n1]"`},
		{"n[1[2]]", `nested '[' at offset 3 in "n[1[2]]"`},
		{"n[]", `hostlist "n[]": empty brackets []`},
		{"n[4-1]", `hostlist "n[4-1]": range "4-1" runs backwards`},
		{"n[a-b]", `hostlist "n[a-b]": bad range "a-b": want N or N-M with decimal N, M (e.g. [01-04,07])`},
		{"n[1-2-3]", `hostlist "n[1-2-3]": bad range "1-2-3": want N or N-M with decimal N, M (e.g. [01-04,07])`},
		{"n[1,,2]", `hostlist "n[1,,2]": bad range "": want N or N-M with decimal N, M (e.g. [01-04,07])`},
		{"a,,b", `empty host name in "a,,b"`},
		{"n[0-99999999]", `hostlist "n[0-99999999]": range "0-99999999": more than 65536 hosts`},
		{"a[0-999]b[0-999]", `hostlist "a[0-999]b[0-999]": more than 65536 hosts`},
	}
	for _, tt := range tests {
		_, err := Expand(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Expand(%q) error:\n got %v\nwant %s", tt.in, err, tt.want)
		}
	}
}

func TestTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"2(x3),1", []int{2, 2, 2, 1}},
		{"4", []int{4}},
		{"1,2,3", []int{1, 2, 3}},
		{"8(x2)", []int{8, 8}},
	}
	for _, tt := range tests {
		got, err := TasksPerNode(tt.in)
		if err != nil {
			t.Errorf("TasksPerNode(%q): %v", tt.in, err)
			continue
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("TasksPerNode(%q) (-want +got):\n%s", tt.in, d)
		}
	}
	for _, in := range []string{"", "x", "2(3)", "2(x)", "2(x3", "0", "2(x0)", "1,,2", "-1"} {
		if got, err := TasksPerNode(in); err == nil {
			t.Errorf("TasksPerNode(%q) = %v, want an error", in, got)
		}
	}
}

func TestSlurm(t *testing.T) {
	got, err := Slurm("tb[1-3]", "2(x2),1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{{Name: "tb1", Slots: 2}, {Name: "tb2", Slots: 2}, {Name: "tb3", Slots: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Slurm (-want +got):\n%s", d)
	}
	got, err = Slurm("a,b", "")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Host{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}}, got); d != "" {
		t.Errorf("Slurm without tasks (-want +got):\n%s", d)
	}
	_, err = Slurm("tb[1-3]", "2(x2)")
	want2 := `SLURM_TASKS_PER_NODE "2(x2)" names 2 nodes, SLURM_JOB_NODELIST "tb[1-3]" has 3`
	if err == nil || err.Error() != want2 {
		t.Errorf("Slurm mismatch error:\n got %v\nwant %s", err, want2)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"node[01-04,07]", "a[1-2]b[3-4],c", "n[8-10] x", "[1-3]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		names, err := Expand(in)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		if len(names) == 0 || len(names) > maxExpand {
			t.Fatalf("Expand(%q) gave %d names", in, len(names))
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "[], \t\n") {
				t.Fatalf("Expand(%q) gave bad name %q", in, n)
			}
		}
	})
}

func FuzzTasksPerNode(f *testing.F) {
	for _, s := range []string{"2(x3),1", "4", "1,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tasks, err := TasksPerNode(in)
		if err != nil {
			return
		}
		for _, n := range tasks {
			if n < 1 {
				t.Fatalf("TasksPerNode(%q) gave %v", in, tasks)
			}
		}
	})
}
