package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCollNetServerLocal: --collnet-server alone starts the server (the
// real ccrun binary in its server mode) on this machine; the ranks get its
// address, the job succeeds, and the server's line reaches stderr.
func TestCollNetServerLocal(t *testing.T) {
	bin, _ := binaries(t)
	cmd := exec.Command(bin, "-np", "2", "--collnet-server", "/bin/sh", "-c", `echo "server=$CC_COLLNET_SERVER"`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, &stderr)
	}
	out, errs := stdout.String(), stderr.String()
	if strings.Count(out, "server=127.0.0.1:") != 2 {
		t.Errorf("ranks printed:\n%s", out)
	}
	if !strings.Contains(errs, "collnet-server: collnet aggregation server listening on") {
		t.Errorf("stderr lacks the server's line:\n%s", errs)
	}
}

// TestCollNetServerBadInput: what --collnet-server cannot be combined with
// is one line and exit 2; the server mode without a job is too.
func TestCollNetServerBadInput(t *testing.T) {
	path := "PATH=" + os.Getenv("PATH")
	alloc := []string{path, "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=tb[1-2]", "SLURM_TASKS_PER_NODE=2(x2)"}
	for _, tt := range []struct {
		env  []string
		args []string
		want string
	}{
		{alloc, []string{"--launcher", "srun", "--collnet-server=tb1", "true"},
			"ccrun: --collnet-server cannot be used with --launcher srun: the server is not a Slurm task; run ccrun with --launcher ssh"},
		{[]string{path}, []string{"--" + collnetServeFlag + "=:0"},
			"ccrun: --collnet-serve: CC_JOB_ID is not set; ccrun sets it"},
	} {
		code, out, errs := ccrun(t, context.Background(), tt.env, tt.args...)
		if code != exitUsage || strings.TrimSpace(errs) != tt.want || out != "" {
			t.Errorf("ccrun %s\n got exit %d, stderr %q, stdout %q\nwant exit %d, stderr %q",
				strings.Join(tt.args, " "), code, errs, out, exitUsage, tt.want)
		}
	}
}
