package bootstrap

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

func lookupOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

var secretFiles = map[string]string{"/run/cc/secret": "file-secret\n", "/run/cc/empty": "\n"}

func readFake(name string) ([]byte, error) {
	if s, ok := secretFiles[name]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func TestDiscover(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		want Identity
	}{
		{"nothing", nil, Identity{Rank: 0, NRanks: 1, LocalRank: 0, LocalNRanks: 1, Source: "none (single rank)"}},
		{"ccrun", map[string]string{
			"CC_RANK": "3", "CC_NRANKS": "8", "CC_LOCAL_RANK": "1", "CC_LOCAL_NRANKS": "2",
			"CC_ROOT_ADDR": "10.1.2.3:41000", "CC_JOB_ID": "ccrun-1234", "CC_JOB_SECRET": "abc",
			"NCCL_COMM_ID": "elsewhere:1", "RANK": "7", "WORLD_SIZE": "9", // ccrun wins, NCCL_COMM_ID ignored
		}, Identity{Rank: 3, NRanks: 8, LocalRank: 1, LocalNRanks: 2, RootAddr: "10.1.2.3:41000",
			Job: wire.Job{ID: "ccrun-1234", Secret: []byte("abc")}, Source: "ccrun (CC_RANK)"}},
		{"ccrun secret file", map[string]string{
			"CC_RANK": "0", "CC_NRANKS": "2", "CC_ROOT_ADDR": "[fe80::1]:41000", "CC_JOB_ID": "j", "CC_JOB_SECRET_FILE": "/run/cc/secret",
		}, Identity{Rank: 0, NRanks: 2, LocalRank: -1, RootAddr: "[fe80::1]:41000",
			Job: wire.Job{ID: "j", Secret: []byte("file-secret")}, Source: "ccrun (CC_RANK)"}},
		{"ccrun single rank with lifeline", map[string]string{
			"CC_RANK": "0", "CC_NRANKS": "1", "CC_ROOT_ADDR": "head:41000", "CC_JOB_ID": "j",
		}, Identity{Rank: 0, NRanks: 1, LocalRank: 0, LocalNRanks: 1, RootAddr: "head:41000", Job: wire.Job{ID: "j"}, Source: "ccrun (CC_RANK)"}},
		{"torchrun", map[string]string{
			"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
			"MASTER_ADDR": "node01", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "r7", "TORCHELASTIC_RESTART_COUNT": "1",
		}, Identity{Rank: 0, NRanks: 4, LocalRank: 0, LocalNRanks: 2, RootAddr: "node01:29501", HostRoot: true,
			Job: wire.Job{ID: "torchrun:node01:29500/r7#1"}, Source: "torchrun (RANK)"}},
		{"torchrun rank 2 with secret", map[string]string{
			"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "CC_JOB_SECRET": "s",
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", // torchrun comes first
		}, Identity{Rank: 2, NRanks: 4, LocalRank: -1, RootAddr: "10.0.0.1:29501",
			Job: wire.Job{ID: "torchrun:10.0.0.1:29500", Secret: []byte("s")}, Source: "torchrun (RANK)"}},
		{"torchrun with NCCL_COMM_ID", map[string]string{
			"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1", "NCCL_COMM_ID": "b:5000",
		}, Identity{Rank: 1, NRanks: 2, LocalRank: -1, RootAddr: "b:5000", Job: wire.Job{ID: "nccl-comm-id:b:5000"}, Source: "torchrun (RANK)"}},
		{"torchrun single rank needs no root", map[string]string{"RANK": "0", "WORLD_SIZE": "1"},
			Identity{Rank: 0, NRanks: 1, LocalRank: 0, LocalNRanks: 1, Source: "torchrun (RANK)"}},
		{"torchrun long job id is hashed", map[string]string{
			"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": strings.Repeat("h", 60), "MASTER_PORT": "2",
		}, Identity{Rank: 1, NRanks: 2, LocalRank: -1, RootAddr: strings.Repeat("h", 60) + ":3",
			Job: wire.Job{ID: jobID("torchrun:" + strings.Repeat("h", 60) + ":2")}, Source: "torchrun (RANK)"}},
		{"mpirun", map[string]string{
			"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "4", "NCCL_COMM_ID": "10.0.0.9:12345",
			"SLURM_PROCID": "0", "SLURM_NTASKS": "1", // mpirun inside an allocation
		}, Identity{Rank: 5, NRanks: 16, LocalRank: 1, LocalNRanks: 4, RootAddr: "10.0.0.9:12345",
			Job: wire.Job{ID: "nccl-comm-id:10.0.0.9:12345"}, Source: "mpirun (OMPI_COMM_WORLD_RANK)"}},
		{"mpirun single rank", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"},
			Identity{Rank: 0, NRanks: 1, LocalRank: 0, LocalNRanks: 1, Source: "mpirun (OMPI_COMM_WORLD_RANK)"}},
		{"pmi", map[string]string{
			"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2", "NCCL_COMM_ID": "[::1]:7000",
		}, Identity{Rank: 0, NRanks: 2, LocalRank: 0, LocalNRanks: 2, RootAddr: "[::1]:7000", HostRoot: true,
			Job: wire.Job{ID: "nccl-comm-id:[::1]:7000"}, Source: "pmi (PMI_RANK)"}},
		{"srun", map[string]string{
			"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
			"SLURM_STEP_TASKS_PER_NODE": "2(x3),1,1", "SLURM_JOB_ID": "123456", "SLURM_STEP_ID": "0",
			"SLURM_STEP_NODELIST": "node[01-04,07],gpu3", "SLURM_JOB_NODELIST": "other[1-9]",
		}, Identity{Rank: 5, NRanks: 8, LocalRank: 1, LocalNRanks: 2, RootAddr: "node01:35296",
			Job: wire.Job{ID: "slurm:123456.0"}, Source: "srun (SLURM_PROCID)"}},
		{"srun job nodelist, rank 0 hosts", map[string]string{
			"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "3",
			"SLURM_JOB_NODELIST": "tb[1-4]", "SLURM_TASKS_PER_NODE": "1(x4)", "SLURM_NODEID": "0",
		}, Identity{Rank: 0, NRanks: 4, LocalRank: -1, LocalNRanks: 1, RootAddr: "tb1:20115", HostRoot: true,
			Job: wire.Job{ID: "slurm:7.3"}, Source: "srun (SLURM_PROCID)"}},
		{"srun with NCCL_COMM_ID needs no step", map[string]string{
			"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "NCCL_COMM_ID": "h:9",
		}, Identity{Rank: 1, NRanks: 2, LocalRank: -1, RootAddr: "h:9", Job: wire.Job{ID: "nccl-comm-id:h:9"}, Source: "srun (SLURM_PROCID)"}},
		{"sbatch script with one task", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "5"},
			Identity{Rank: 0, NRanks: 1, LocalRank: 0, LocalNRanks: 1, Source: "srun (SLURM_PROCID)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := discover(lookupOf(tc.vars), readFake)
			if err != nil {
				t.Fatalf("got error %v, want %+v", err, tc.want)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		want []string // every one must appear in the error
	}{
		{"RANK without WORLD_SIZE", map[string]string{"RANK": "0", "LOCAL_RANK": "0"}, []string{"RANK is set but WORLD_SIZE is not"}},
		{"WORLD_SIZE without RANK", map[string]string{"WORLD_SIZE": "2"}, []string{"WORLD_SIZE is set but RANK is not"}},
		{"CC_RANK without CC_NRANKS", map[string]string{"CC_RANK": "0"}, []string{"CC_NRANKS is not"}},
		{"PMI_SIZE without PMI_RANK", map[string]string{"PMI_SIZE": "2"}, []string{"PMI_RANK is not"}},
		{"SLURM_PROCID without SLURM_NTASKS", map[string]string{"SLURM_PROCID": "2"}, []string{"SLURM_NTASKS is not"}},
		{"non-numeric rank", map[string]string{"RANK": "one", "WORLD_SIZE": "2"}, []string{`RANK="one" is not an integer`}},
		{"empty size", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": ""}, []string{`OMPI_COMM_WORLD_SIZE="" is not an integer`}},
		{"negative rank", map[string]string{"CC_RANK": "-1", "CC_NRANKS": "2"}, []string{"CC_RANK=-1 is negative"}},
		{"zero size", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "0"}, []string{"PMI_SIZE=0", "at least 1"}},
		{"rank >= size", map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, []string{"RANK=4 is not below WORLD_SIZE=4", "0..3"}},
		{"too many ranks", map[string]string{"RANK": "0", "WORLD_SIZE": "100000000"}, []string{"WORLD_SIZE=100000000", "at most"}},
		{"local rank >= local size", map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"},
			[]string{"LOCAL_RANK=2 is not below the 2 ranks"}},
		{"local size > size", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "a", "MASTER_PORT": "1"},
			[]string{"LOCAL_WORLD_SIZE=3", "WORLD_SIZE=2"}},
		{"non-numeric local rank", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "x"}, []string{`SLURM_LOCALID="x"`}},
		{"mpirun without NCCL_COMM_ID", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"},
			[]string{"OMPI_COMM_WORLD_SIZE=2", "set NCCL_COMM_ID=host:port"}},
		{"pmi without NCCL_COMM_ID", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4"}, []string{"PMI_SIZE=4", "NCCL_COMM_ID"}},
		{"bad NCCL_COMM_ID", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "NCCL_COMM_ID": "hostonly"}, []string{`NCCL_COMM_ID="hostonly"`, "host:port"}},
		{"NCCL_COMM_ID port 0", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "NCCL_COMM_ID": "h:0"}, []string{`NCCL_COMM_ID="h:0"`, "1..65535"}},
		{"NCCL_COMM_ID no host", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "NCCL_COMM_ID": ":80"}, []string{"empty host"}},
		{"torchrun without master", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a"}, []string{"MASTER_PORT", "NCCL_COMM_ID"}},
		{"torchrun bad port", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "http"}, []string{`"a:http"`, "1..65535"}},
		{"torchrun port 65535", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "65535"}, []string{"MASTER_PORT=65535"}},
		{"ccrun without root", map[string]string{"CC_RANK": "0", "CC_NRANKS": "2"}, []string{"CC_ROOT_ADDR is not set"}},
		{"ccrun without job", map[string]string{"CC_RANK": "0", "CC_NRANKS": "2", "CC_ROOT_ADDR": "h:1"}, []string{"CC_JOB_ID is not"}},
		{"ccrun bad root", map[string]string{"CC_RANK": "0", "CC_NRANKS": "2", "CC_ROOT_ADDR": "h:99999", "CC_JOB_ID": "j"}, []string{"CC_ROOT_ADDR", "99999"}},
		{"ccrun long job id", map[string]string{"CC_RANK": "0", "CC_NRANKS": "2", "CC_ROOT_ADDR": "h:1", "CC_JOB_ID": strings.Repeat("j", 65)},
			[]string{"CC_JOB_ID", "at most 64"}},
		{"two secrets", map[string]string{"CC_RANK": "0", "CC_NRANKS": "1", "CC_JOB_SECRET": "a", "CC_JOB_SECRET_FILE": "/run/cc/secret"},
			[]string{"both CC_JOB_SECRET and CC_JOB_SECRET_FILE"}},
		{"missing secret file", map[string]string{"CC_RANK": "0", "CC_NRANKS": "1", "CC_JOB_SECRET_FILE": "/nope"}, []string{"CC_JOB_SECRET_FILE=/nope", "not exist"}},
		{"empty secret file", map[string]string{"CC_RANK": "0", "CC_NRANKS": "1", "CC_JOB_SECRET_FILE": "/run/cc/empty"}, []string{"CC_JOB_SECRET_FILE=/run/cc/empty is empty"}},
		{"srun without step", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "a"},
			[]string{"SLURM_STEP_ID is not set", "srun"}},
		{"srun bad job id", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "9x", "SLURM_STEP_ID": "0"}, []string{`SLURM_JOB_ID="9x"`}},
		{"srun without nodelist", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0"},
			[]string{"SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST"}},
		{"srun malformed nodelist", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0",
			"SLURM_STEP_NODELIST": "node[01-04"}, []string{"SLURM_STEP_NODELIST", `"node[01-04"`, "missing ']'"}},
		{"srun bad tasks per node", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NODEID": "1",
			"SLURM_STEP_TASKS_PER_NODE": "2(3)"}, []string{"SLURM_STEP_TASKS_PER_NODE", `"2(3)"`}},
		{"srun node beyond tasks per node", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NODEID": "5",
			"SLURM_STEP_TASKS_PER_NODE": "2(x2)"}, []string{"covers 2 nodes", "node index 5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := discover(lookupOf(tc.vars), readFake)
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

// Discover itself reads a real secret file.
func TestDiscoverSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("real\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := Discover(lookupOf(map[string]string{"CC_RANK": "0", "CC_NRANKS": "1", "CC_JOB_SECRET_FILE": path}))
	if err != nil || string(id.Job.Secret) != "real" {
		t.Errorf("got %q, %v; want secret %q", id.Job.Secret, err, "real")
	}
	_, err = Discover(lookupOf(map[string]string{"CC_RANK": "0", "CC_NRANKS": "1", "CC_JOB_SECRET_FILE": path + "x"}))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestSlurmPort(t *testing.T) {
	for _, tc := range []struct {
		job, step uint64
		want      int
	}{
		{123456, 0, 35296},
		{0, 0, 20000},
		{2499, 15, 59999},
		{2500, 16, 20000},
		{7, 3, 20115},
		{1<<64 - 1, 1<<32 - 2, 20000 + 16*int((1<<64-1)%2500) + 14},
	} {
		if got := SlurmPort(tc.job, tc.step); got != tc.want {
			t.Errorf("SlurmPort(%d, %d) = %d, want %d", tc.job, tc.step, got, tc.want)
		}
	}
	// Nearby jobs and steps never collide.
	seen := map[int]string{}
	for job := uint64(100000); job < 102500; job++ {
		for step := range uint64(16) {
			p := SlurmPort(job, step)
			if p < 20000 || p > 59999 {
				t.Fatalf("port %d out of range", p)
			}
			if prev, ok := seen[p]; ok {
				t.Fatalf("job %d step %d collides with %s on port %d", job, step, prev, p)
			}
			seen[p] = "x"
		}
	}
}
