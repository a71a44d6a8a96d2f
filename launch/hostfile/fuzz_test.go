package hostfile

import (
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// FuzzSlurm: an allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE)
// gives hosts whose slots add up to the tasks Slurm lists, or a one-line
// error.
func FuzzSlurm(f *testing.F) {
	f.Add("tb[1-4]", "2(x3),1")
	f.Add("node[01-02],login", "")
	f.Add("a,a", "1,2")
	f.Add("tb[1-3]", "2(x2)")
	f.Fuzz(func(t *testing.T, nodelist, tasksPerNode string) {
		hosts, err := Slurm(nodelist, tasksPerNode)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		names, err := Expand(nodelist)
		if err != nil {
			t.Fatalf("Slurm(%q) accepted a node list Expand refuses: %v", nodelist, err)
		}
		want := len(names)
		if tasksPerNode != "" {
			tasks, err := TasksPerNode(tasksPerNode)
			if err != nil {
				t.Fatalf("Slurm accepted tasks %q that TasksPerNode refuses: %v", tasksPerNode, err)
			}
			want = 0
			for _, n := range tasks {
				want += n
			}
		}
		got := 0
		for _, h := range hosts {
			got += h.Slots
		}
		if got != want {
			t.Fatalf("Slurm(%q, %q) gives %d slots, want %d", nodelist, tasksPerNode, got, want)
		}
	})
}

// FuzzTasksAgree: ccrun (TasksPerNode) and a rank's bootstrap discovery
// (bootstrap.TasksOnNode) read SLURM_TASKS_PER_NODE alike: the same count
// for every node, the same items refused.
func FuzzTasksAgree(f *testing.F) {
	f.Add("2(x3),1", 3)
	f.Add("4", 0)
	f.Add("1,2,3", 5)
	f.Add("+2", 0)
	f.Add("2(x0)", 0)
	f.Fuzz(func(t *testing.T, spec string, node int) {
		tasks, err := TasksPerNode(spec)
		n, berr := bootstrap.TasksOnNode(spec, node)
		fuzzcheck.OneLine(t, err)
		fuzzcheck.OneLine(t, berr)
		switch {
		case err != nil && berr == nil && (strings.Contains(err.Error(), "more than") || strings.Contains(err.Error(), "from 1 to")):
			// ccrun bounds the nodes it expands and the tasks of each; the
			// rank reads its own count only.
		case err != nil || node < 0 || node >= len(tasks):
			if berr == nil {
				t.Fatalf("tasks %q, node %d: TasksPerNode says %v (%v), TasksOnNode %d", spec, node, tasks, err, n)
			}
		case berr != nil || n != tasks[node]:
			t.Fatalf("tasks %q, node %d: TasksPerNode says %d, TasksOnNode %d (%v)", spec, node, tasks[node], n, berr)
		}
	})
}
