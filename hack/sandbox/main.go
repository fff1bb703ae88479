// Command sandbox starts, enters and stops throwaway systemd instances by hand (and for make demo).
//
//	go run ./hack/sandbox start [-bind PATH]... NAME   boot NAME in the background; prints name and init PID
//	go run ./hack/sandbox exec NAME -- CMD [ARG...]    run CMD inside (interactive when stdin is a tty)
//	go run ./hack/sandbox stop NAME                    power NAME off and remove its cgroups and state
//	go run ./hack/sandbox list                         show the instances in the state root
//
// Every command takes -root DIR (default /var/lib/slicelet-sandbox) before the name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/slicelet/slicelet/internal/sandbox"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = start(os.Args[2:])
	case "exec":
		var code int
		code, err = execIn(os.Args[2:])
		if err == nil {
			os.Exit(code)
		}
	case "stop":
		err = stop(os.Args[2:])
	case "list":
		err = list(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: sandbox start [-root DIR] [-bind PATH]... NAME | exec [-root DIR] NAME -- CMD... | stop [-root DIR] NAME | list [-root DIR]")
	os.Exit(2)
}

type binds []string

func (b *binds) String() string     { return fmt.Sprint(*b) }
func (b *binds) Set(v string) error { *b = append(*b, v); return nil }

// parse parses flags and returns the one instance name the command needs.
func parse(fs *flag.FlagSet, args []string, wantName bool) string {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if !wantName {
		return ""
	}
	if fs.NArg() < 1 {
		usage()
	}
	return fs.Arg(0)
}

func start(args []string) error {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	root := fs.String("root", sandbox.DefaultStateRoot, "state root")
	var extra binds
	fs.Var(&extra, "bind", "host path to bind read-write at the same path inside (repeatable)")
	name := parse(fs, args, true)
	inst, err := sandbox.Start(context.Background(), sandbox.Options{
		Name:       name,
		StateRoot:  *root,
		Log:        os.Stderr,
		ExtraBinds: extra,
		Detached:   true,
	})
	if err != nil {
		return err
	}
	fmt.Printf("%s %d\n", inst.Name(), inst.InitPID())
	return nil
}

func execIn(args []string) (int, error) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	root := fs.String("root", sandbox.DefaultStateRoot, "state root")
	name := parse(fs, args, true)
	cmdArgs := fs.Args()[1:]
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	if len(cmdArgs) == 0 {
		usage()
	}
	inst, err := sandbox.Attach(*root, name)
	if err != nil {
		return 0, err
	}
	cmd := inst.Command(context.Background(), cmdArgs[0], cmdArgs[1:]...)
	// The caller's stdin, stdout and stderr pass straight through: with a terminal on stdin the
	// command is interactive (a shell works), with a pipe it reads the pipe.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Signals from the terminal reach nsenter's process group directly; do not die before it.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

func stop(args []string) error {
	fs := flag.NewFlagSet("stop", flag.ContinueOnError)
	root := fs.String("root", sandbox.DefaultStateRoot, "state root")
	name := parse(fs, args, true)
	inst, err := sandbox.Attach(*root, name)
	if err != nil {
		// Already dead: clean up whatever it left.
		if serr := sandbox.Sweep(*root, os.Stderr); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	if err := inst.Stop(); err != nil {
		return err
	}
	fmt.Printf("stopped %s\n", name)
	return nil
}

func list(args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	root := fs.String("root", sandbox.DefaultStateRoot, "state root")
	parse(fs, args, false)
	st, err := sandbox.List(*root)
	if err != nil {
		return err
	}
	for _, s := range st {
		state := "stale"
		if s.Running {
			state = "running"
		}
		fmt.Printf("%s\t%d\t%s\t%s\n", s.Name, s.InitPID, state, s.StateDir)
	}
	return nil
}
