package launch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSrunArgs(t *testing.T) {
	spec := Spec{Slot: Slot{Rank: 3, Host: "tb2"}, Argv: []string{"cc-perf", "all_reduce", "-b", "8"}, Dir: "/work", DirOptional: true}
	got := SrunArgs(spec)
	want := []string{"--nodes=1", "--ntasks=1", "--nodelist=tb2", "--exact", "--kill-on-bad-exit=1", "--job-name=ccrun",
		"/bin/sh", "-c", srunScript, "ccrun", "/work", "1", "cc-perf", "all_reduce", "-b", "8"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SrunArgs (-want +got):\n%s", diff)
	}
	if strings.Contains(srunScript, "'") {
		t.Errorf("srunScript contains a single quote")
	}
}

func TestParseNodeAddrs(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
	}{
		{"NodeName=tb1 Arch=x86_64 CoresPerSocket=1 \n   CPUAlloc=0 NodeAddr=10.251.0.1 NodeHostName=tb1\nNodeName=tb2 NodeAddr=10.251.0.2\n",
			map[string]string{"tb1": "10.251.0.1", "tb2": "10.251.0.2"}},
		{"NodeName=n01 State=IDLE\n", map[string]string{"n01": "n01"}},
		{"No nodes in the system\n", map[string]string{}},
		{"", map[string]string{}},
	}
	for _, tt := range tests {
		if got := ParseNodeAddrs(tt.in); !cmp.Equal(got, tt.want) {
			t.Errorf("ParseNodeAddrs(%q)\n got %v\nwant %v", tt.in, got, tt.want)
		}
	}
}

func FuzzParseNodeAddrs(f *testing.F) {
	f.Add("NodeName=tb1 NodeAddr=10.251.0.1\nNodeName=tb2\n")
	f.Add("NodeName= NodeAddr=x")
	f.Fuzz(func(t *testing.T, s string) {
		for name, addr := range ParseNodeAddrs(s) {
			if name == "" || addr == "" || strings.ContainsAny(name+addr, " \t\n") {
				t.Errorf("ParseNodeAddrs(%q) gave %q -> %q", s, name, addr)
			}
		}
	})
}

// fakeSlurm writes stand-ins for srun (runs the task here, after dropping srun's options)
// and scontrol (lists node tb1 at 127.0.0.1).
func fakeSlurm(t *testing.T) *Srun {
	t.Helper()
	dir := t.TempDir()
	srun := filepath.Join(dir, "srun")
	scontrol := filepath.Join(dir, "scontrol")
	os.WriteFile(srun, []byte("#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in --*) shift;; *) break;; esac; done\nexec \"$@\"\n"), 0o755)
	os.WriteFile(scontrol, []byte("#!/bin/sh\necho 'NodeName=tb1 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=tb1'\n"), 0o755)
	return &Srun{Path: srun, Scontrol: scontrol, Environ: []string{"PATH=" + os.Getenv("PATH")}}
}

func TestSrunStart(t *testing.T) {
	s := fakeSlurm(t)
	ctx := context.Background()
	if err := s.Connect(ctx, []RemoteHost{{Name: "tb1"}}); err != nil {
		t.Fatal(err)
	}
	if local, remote := s.Addrs("tb1"); local != "127.0.0.1" || remote != "127.0.0.1" {
		t.Errorf("Addrs(tb1) = %q, %q, want 127.0.0.1, 127.0.0.1", local, remote)
	}
	if err := s.Connect(ctx, []RemoteHost{{Name: "tb9"}}); err == nil || !strings.Contains(err.Error(), "host tb9 is not a node") {
		t.Errorf("Connect(tb9) = %v, want an error naming tb9", err)
	}
	tests := []struct {
		name    string
		argv    []string
		want    Exit
		out     string
		errText string
	}{
		{"secret, env and exit code", []string{"/bin/sh", "-c", `echo "secret=$(cat "$CC_JOB_SECRET_FILE") rank=$CC_RANK"; exit 3`},
			Exit{Code: 3}, "secret=s3cr3t rank=5\n", ""},
		{"missing program", []string{"no-such-program-ccrun"}, Exit{Code: 127}, "", "ccrun: program no-such-program-ccrun not found on host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			p, err := s.Start(ctx, Spec{Slot: Slot{Rank: 5, Host: "tb1"}, Argv: tt.argv, Env: []string{"CC_RANK=5"}, Secret: "s3cr3t", Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatal(err)
			}
			if p.Pid() <= 0 {
				t.Errorf("Pid() = %d, want the task's pid", p.Pid())
			}
			if got := p.Wait(); got != tt.want {
				t.Errorf("Wait() = %v, want %v", got, tt.want)
			}
			if out.String() != tt.out || !strings.Contains(errb.String(), tt.errText) {
				t.Errorf("stdout %q, stderr %q; want stdout %q, stderr containing %q", out.String(), errb.String(), tt.out, tt.errText)
			}
		})
	}
	t.Run("signal", func(t *testing.T) {
		var out bytes.Buffer
		p, err := s.Start(ctx, Spec{Slot: Slot{Host: "tb1"}, Argv: []string{"sleep", "30"}, Secret: "x", Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if got := p.Wait(); got != (Exit{Signal: syscall.SIGTERM}) {
			t.Errorf("Wait() after SIGTERM = %v, want signal 15", got)
		}
	})
}
