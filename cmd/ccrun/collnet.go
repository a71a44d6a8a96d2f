package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/collnet"
)

// collnetHere is --collnet-server without a host: the server runs on this machine.
const collnetHere = "localhost"

// collnetServeFlag is the hidden flag of the server's own process. The server is ccrun
// itself in another mode, so that every host that can run ccrun can run the server, and
// cmd/ holds no further command.
const collnetServeFlag = "collnet-serve"

// collnetServer is the launch request of --collnet-server, or nil.
func collnetServer(o *Options) (*launch.CollNetServer, error) {
	if o.CollNet == "" {
		return nil, nil
	}
	if o.Launcher == launcherSrun {
		return nil, usagef("--collnet-server cannot be used with --launcher srun: the server is not a Slurm task; run ccrun with --launcher ssh")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--collnet-server: cannot find ccrun's own executable to start the server: %w", err)
	}
	return &launch.CollNetServer{Host: o.CollNet, Argv: []string{exe, "--" + collnetServeFlag + "=:0"}}, nil
}

// serveCollNet is the server's process: it listens on addr for the job ccrun's
// environment names, says where on stdout (launch reads the port from that line), logs
// dropped connections on stderr, and serves until ccrun's SIGTERM (ctx).
func serveCollNet(ctx context.Context, addr string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	job, err := bootstrap.JobFromEnv(lookup)
	if err != nil {
		return usagef("--%s: %v", collnetServeFlag, err)
	}
	s, err := collnet.Listen(collnet.Options{Job: job, Addr: addr, Logf: func(format string, args ...any) {
		fmt.Fprintf(stderr, format+"\n", args...)
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s%s\n", collnet.Name, launch.CollNetListening, s.Addr())
	<-ctx.Done()
	return s.Close()
}
