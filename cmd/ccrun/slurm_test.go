package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestLauncherBadInput: --launcher values and what --launcher srun cannot be combined with
// give one line and exit status 2, before anything starts.
func TestLauncherBadInput(t *testing.T) {
	path := "PATH=" + os.Getenv("PATH")
	alloc := []string{path, "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=tb[1-2]", "SLURM_TASKS_PER_NODE=2(x2)"}
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown launcher", nil, []string{"--launcher", "pbs", "true"}, `ccrun: bad --launcher "pbs" (allowed: ssh, srun)`},
		{"srun outside an allocation", []string{path}, []string{"--launcher", "srun", "-np", "2", "true"},
			"ccrun: --launcher srun needs a Slurm allocation, but SLURM_JOB_ID is not set: run ccrun under salloc or sbatch"},
		{"srun with preload", alloc, []string{"--launcher", "srun", "--preload-binary", "true"},
			"ccrun: --preload-binary cannot be used with --launcher srun: use sbcast or a shared file system"},
		{"srun with skip-unreachable", alloc, []string{"--launcher", "srun", "--skip-unreachable", "true"},
			"ccrun: --skip-unreachable cannot be used with --launcher srun: Slurm allocates only nodes it reaches (sbatch --exclude drops others)"},
		{"srun with oversubscribe", alloc, []string{"--launcher", "srun", "--oversubscribe", "true"},
			"ccrun: --oversubscribe cannot be used with --launcher srun: Slurm runs at most the allocation's tasks at once"},
		{"srun with more ranks than tasks", alloc, []string{"--launcher", "srun", "-np", "5", "true"},
			"ccrun: --launcher srun: -np 5 is more than the 4 tasks of the Slurm allocation (SLURM_JOB_NODELIST=tb[1-2], SLURM_TASKS_PER_NODE=2(x2)): use -np 4 or fewer, or allocate more tasks (salloc/sbatch -n)"},
		{"ssh with more ranks than tasks", alloc, []string{"-np", "5", "true"},
			"ccrun: the Slurm allocation (SLURM_JOB_NODELIST=tb[1-2], SLURM_TASKS_PER_NODE=2(x2)): 5 ranks requested but the 2 hosts have 4 slots: use -np 4 or fewer, add slots, or add --oversubscribe"},
		{"malformed allocation nodelist", []string{path, "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=tb[1-", "SLURM_TASKS_PER_NODE=2"}, []string{"true"},
			`ccrun: SLURM_JOB_NODELIST: unclosed '[' in "tb[1-"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := ccrun(t, context.Background(), tt.env, tt.args...)
			if code != exitUsage || strings.TrimSpace(errs) != tt.want || out != "" {
				t.Errorf("ccrun %s\n got exit %d, stderr %q, stdout %q\nwant exit %d, stderr %q",
					strings.Join(tt.args, " "), code, errs, out, exitUsage, tt.want)
			}
		})
	}
}
