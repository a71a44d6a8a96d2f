package bootstrap

import (
	"strings"
	"testing"
)

// TestDiscoverSlurmTask0Elsewhere: under srun, the root is looked for on the first node of
// the step, which is where task 0 runs except with -m arbitrary (seen on a real Slurm
// 22.05: SLURM_HOSTFILE listing tb2 before tb1 puts task 0 on tb2 while
// SLURM_STEP_NODELIST=tb[1-2]). Both cases are errors that say to set NCCL_COMM_ID, and
// NCCL_COMM_ID makes them work.
func TestDiscoverSlurmTask0Elsewhere(t *testing.T) {
	base := map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "52", "SLURM_STEP_ID": "0",
		"SLURM_STEP_NODELIST": "tb[1-2]"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		want []string // empty: no error
	}{
		{"arbitrary distribution", with("SLURM_DISTRIBUTION", "arbitrary", "SLURM_PROCID", "1", "SLURMD_NODENAME", "tb1"),
			[]string{"SLURM_DISTRIBUTION=arbitrary", "tb1, the first node of SLURM_STEP_NODELIST=tb[1-2]", "set NCCL_COMM_ID"}},
		{"rank 0 not on the first node", with("SLURMD_NODENAME", "tb2"),
			[]string{"SLURM_PROCID=0 runs on SLURMD_NODENAME=tb2, not on tb1", "a free port on tb2"}},
		{"rank 0 on the first node", with("SLURMD_NODENAME", "tb1", "SLURM_DISTRIBUTION", "cyclic"), nil},
		{"rank 1 elsewhere is fine", with("SLURMD_NODENAME", "tb2", "SLURM_PROCID", "1"), nil},
		{"arbitrary with NCCL_COMM_ID", with("SLURM_DISTRIBUTION", "arbitrary", "SLURMD_NODENAME", "tb2", "NCCL_COMM_ID", "tb2:29500"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := discover(lookupOf(tc.vars), readFake)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error containing %q", got, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
