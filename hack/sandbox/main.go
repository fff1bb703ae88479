// Command sandbox starts, enters and stops throwaway systemd instances by hand (for make demo and
// the kubelet peer harness).
//
//	go run ./hack/sandbox start [FLAGS] NAME          boot NAME in the background; prints name and init PID
//	go run ./hack/sandbox exec NAME -- CMD [ARG...]   run CMD inside (interactive when stdin is a tty)
//	go run ./hack/sandbox stop NAME                   power NAME off and remove its cgroups and state
//	go run ./hack/sandbox list                        show the instances in the state root
//
// Every command takes -root DIR (default /var/lib/slicelet-sandbox) before the name. start also
// takes, before the name:
//
//	-overlay-root           a writable root: an overlay of the host's whose writes stay in the
//	                        instance and vanish with it (package installs, programs that write
//	                        /etc or /var/lib); other host mounts stay read-only
//	-bind SRC[:DST][:ro]    the host file or directory SRC at DST inside (default: the same path),
//	                        read-write, or read-only with :ro; repeatable. Needed for anything under
//	                        /tmp, /run, /var/tmp, /var/lib/systemd or /var/log/journal, which the
//	                        instance replaces with its own: a checkout there is invisible inside
//	                        unless bound.
//	-bind-file SRC:DST      the host file SRC, read-only, over DST inside, also in the instance's
//	                        own /proc and /dev; repeatable. E.g. a file holding 1 over
//	                        /proc/sys/vm/overcommit_memory: a program that checks the setting finds
//	                        it set, the machine's stays as it is.
//	-symlink PATH:TARGET    a symbolic link PATH inside pointing to TARGET (ln -s TARGET PATH), on
//	                        a writable file system inside (/dev, /run, /tmp, a bind, or anywhere
//	                        with -overlay-root); repeatable. E.g. /dev/kmsg:/dev/console.
//
// In these values ':' separates the parts; write '\:' for a colon in a path and '\\' for a
// backslash. A -bind value that names an existing path as a whole is that path, colons and all.
//
// For the kubelet beside slicelet (it writes /var/lib/kubelet and /etc, checks three kernel
// settings and opens /dev/kmsg):
//
//	go run ./hack/sandbox start -overlay-root -bind "$PWD" \
//	    -bind-file build/one:/proc/sys/vm/overcommit_memory -bind-file build/ten:/proc/sys/kernel/panic \
//	    -bind-file build/one:/proc/sys/kernel/panic_on_oops -symlink /dev/kmsg:/dev/console peer
//
// exec runs CMD in / inside. When CMD names a host path the instance cannot see (it lies under
// one of the directories above and was not bound), exec says so and names the -bind that makes
// it visible, and exits 127 without running it; for such a path among the arguments it warns.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "exec" {
		// Signals from the terminal reach nsenter's process group directly; do not die before it.
		signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usageText = `usage: sandbox start [-root DIR] [-overlay-root] [-bind SRC[:DST][:ro]]... [-bind-file SRC:DST]... [-symlink PATH:TARGET]... NAME
       sandbox exec [-root DIR] NAME -- CMD [ARG...]
       sandbox stop [-root DIR] NAME
       sandbox list [-root DIR]`

// errUsage makes run print the usage and exit 2; errReported exit 2 after the flag package
// already printed the problem and the usage.
var (
	errUsage    = errors.New("usage")
	errReported = errors.New("reported")
)

// run is the command: args without the program name; it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprintln(stderr, usageText)
		return 2
	}
	var err error
	code := 0
	switch args[0] {
	case "start":
		err = start(args[1:], stdout, stderr)
	case "exec":
		code, err = execIn(args[1:], stdin, stdout, stderr)
	case "stop":
		err = stop(args[1:], stdout, stderr)
	case "list":
		err = list(args[1:], stdout, stderr)
	default:
		err = errUsage
	}
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, usageText)
		return 2
	case errors.Is(err, errReported):
		return 2
	case err != nil:
		fmt.Fprintln(stderr, err)
		return 1
	}
	return code
}

// listFlag is a repeatable flag whose values parse into T.
type listFlag[T any] struct {
	vals  *[]T
	parse func(string) (T, error)
}

func (f listFlag[T]) String() string { return "" }

func (f listFlag[T]) Set(v string) error {
	x, err := f.parse(v)
	if err != nil {
		return err
	}
	*f.vals = append(*f.vals, x)
	return nil
}

// splitSpec splits a flag value at each ':' that is not escaped; "\:" is a colon and "\\" a
// backslash within a part.
func splitSpec(v string) ([]string, error) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			if i+1 == len(v) || (v[i+1] != ':' && v[i+1] != '\\') {
				return nil, fmt.Errorf("%q: a backslash must escape ':' or '\\'", v)
			}
			i++
			cur.WriteByte(v[i])
		case c == ':':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, cur.String()), nil
}

// parseBind parses SRC[:DST][:ro|:rw]. A value naming an existing absolute path as a whole is
// SRC alone: -bind PATH keeps meaning PATH, whatever it contains.
func parseBind(v string, exists func(string) bool) (sandbox.Bind, error) {
	if filepath.IsAbs(v) && exists(v) {
		return sandbox.Bind{Source: v}, nil
	}
	parts, err := splitSpec(v)
	if err != nil {
		return sandbox.Bind{}, err
	}
	var b sandbox.Bind
	if n := len(parts); n > 1 && (parts[n-1] == "ro" || parts[n-1] == "rw") {
		b.ReadOnly = parts[n-1] == "ro"
		parts = parts[:n-1]
	}
	switch len(parts) {
	case 1:
		b.Source = parts[0]
	case 2:
		b.Source, b.Target = parts[0], parts[1]
	default:
		return sandbox.Bind{}, fmt.Errorf("%q: want SRC[:DST][:ro]", v)
	}
	if b.Source == "" {
		return sandbox.Bind{}, fmt.Errorf("%q: want SRC[:DST][:ro]", v)
	}
	return b, nil
}

// parsePair parses A:B, both non-empty.
func parsePair(v, want string) (string, string, error) {
	parts, err := splitSpec(v)
	if err != nil {
		return "", "", err
	}
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", fmt.Errorf("%q: want %s", v, want)
	}
	return parts[0], parts[1], nil
}

func parseFileBind(v string) (sandbox.FileBind, error) {
	src, dst, err := parsePair(v, "SRC:DST")
	return sandbox.FileBind{Source: src, Target: dst}, err
}

func parseSymlink(v string) (sandbox.Symlink, error) {
	p, target, err := parsePair(v, "PATH:TARGET")
	return sandbox.Symlink{Path: p, Target: target}, err
}

// absolute makes a relative host path given on the command line absolute, so that -bind-file
// build/one:... works from a checkout.
func absolute(p string) (string, error) {
	if p == "" || filepath.IsAbs(p) {
		return p, nil
	}
	return filepath.Abs(p)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// newFlagSet returns a flag set that reports to stderr and takes -root.
func newFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usageText); fs.PrintDefaults() }
	return fs, fs.String("root", sandbox.DefaultStateRoot, "state root")
}

// parse parses flags and returns the one instance name the command needs; fs.Args() keeps the
// name and what follows it.
func parse(fs *flag.FlagSet, args []string, wantName bool) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", errReported
	}
	if !wantName {
		if fs.NArg() > 0 {
			return "", errUsage
		}
		return "", nil
	}
	if fs.NArg() < 1 {
		return "", errUsage
	}
	return fs.Arg(0), nil
}

// parseAfterName parses flags given after the name too (start NAME -bind X), for the commands
// that take nothing else.
func parseAfterName(fs *flag.FlagSet, args []string) (string, error) {
	name, err := parse(fs, args, true)
	if err != nil {
		return "", err
	}
	if rest := fs.Args()[1:]; len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return "", errReported
		}
		if fs.NArg() > 0 {
			return "", fmt.Errorf("sandbox %s: one name, got %q and %q", fs.Name(), name, fs.Args())
		}
	}
	return name, nil
}

func start(args []string, stdout, stderr io.Writer) error {
	fs, root := newFlagSet("start", stderr)
	overlay := fs.Bool("overlay-root", false, "a writable overlay of the host root whose writes vanish with the instance")
	var o sandbox.Options
	fs.Var(listFlag[sandbox.Bind]{&o.Binds, func(v string) (sandbox.Bind, error) { return parseBind(v, exists) }},
		"bind", "bind host path `SRC[:DST][:ro]`: SRC at DST inside (default the same path), read-write, or read-only with :ro (repeatable)")
	fs.Var(listFlag[sandbox.FileBind]{&o.FileBinds, parseFileBind},
		"bind-file", "put host file `SRC:DST`: SRC, read-only, over DST inside, also in /proc and /dev (repeatable)")
	fs.Var(listFlag[sandbox.Symlink]{&o.Symlinks, parseSymlink},
		"symlink", "create symbolic link `PATH:TARGET`: PATH inside pointing to TARGET (repeatable)")
	name, err := parseAfterName(fs, args)
	if err != nil {
		return err
	}
	for n := range o.Binds {
		if o.Binds[n].Source, err = absolute(o.Binds[n].Source); err != nil {
			return err
		}
	}
	for n := range o.FileBinds {
		if o.FileBinds[n].Source, err = absolute(o.FileBinds[n].Source); err != nil {
			return err
		}
	}
	o.Name, o.StateRoot, o.Log, o.Detached, o.OverlayRoot = name, *root, stderr, true, *overlay
	inst, err := sandbox.Start(context.Background(), o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %d\n", inst.Name(), inst.InitPID())
	return nil
}

func execIn(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs, root := newFlagSet("exec", stderr)
	name, err := parse(fs, args, true)
	if err != nil {
		return 0, err
	}
	cmdArgs := fs.Args()[1:]
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	if len(cmdArgs) == 0 {
		return 0, errUsage
	}
	inst, err := sandbox.Attach(*root, name)
	if err != nil {
		return 0, err
	}
	if code, stop := checkHidden(inst, *root, cmdArgs, stderr); stop {
		return code, nil
	}
	cmd := inst.Command(context.Background(), cmdArgs[0], cmdArgs[1:]...)
	// The caller's stdin, stdout and stderr pass straight through: with a terminal on stdin the
	// command is interactive (a shell works), with a pipe it reads the pipe.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
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

// checkHidden explains host paths in a command line that the instance cannot see: the command
// itself stops exec (exit 127, as a shell's "not found"), an argument (a whole argument or the
// value of -flag=VALUE) gets a warning.
func checkHidden(inst *sandbox.Instance, root string, cmdArgs []string, stderr io.Writer) (code int, stop bool) {
	for n, a := range cmdArgs {
		p := a
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			p = v
		}
		dir, hidden := inst.HiddenPath(p)
		if !hidden {
			continue
		}
		p = filepath.Clean(p)
		fix := bindFix(p, dir)
		rootFlag := ""
		if root != sandbox.DefaultStateRoot {
			rootFlag = " -root " + strconv.Quote(root)
		}
		msg := fmt.Sprintf("%s: not found inside %s, which has its own %s (the host's is hidden there); start the instance with -bind %s to see it at the same path: sandbox stop%s %s; sandbox start%s -bind %s %s",
			p, inst.Name(), dir, strconv.Quote(fix), rootFlag, inst.Name(), rootFlag, strconv.Quote(fix), inst.Name())
		if n == 0 {
			fmt.Fprintf(stderr, "sandbox exec: %s\n", msg)
			return 127, true
		}
		fmt.Fprintf(stderr, "sandbox exec: warning: %s\n", msg)
	}
	return 0, false
}

// bindFix is what to bind so that p, hidden below dir, shows inside: the first path element
// below dir (a checkout's directory, not just the one file).
func bindFix(p, dir string) string {
	rel := strings.TrimPrefix(p, dir+"/")
	first, _, _ := strings.Cut(rel, "/")
	return dir + "/" + first
}

func stop(args []string, stdout, stderr io.Writer) error {
	fs, root := newFlagSet("stop", stderr)
	name, err := parseAfterName(fs, args)
	if err != nil {
		return err
	}
	inst, err := sandbox.Attach(*root, name)
	if err != nil {
		// Already dead: clean up whatever it left.
		if serr := sandbox.Sweep(*root, stderr); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	if err := inst.Stop(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stopped %s\n", name)
	return nil
}

func list(args []string, stdout, stderr io.Writer) error {
	fs, root := newFlagSet("list", stderr)
	if _, err := parse(fs, args, false); err != nil {
		return err
	}
	st, err := sandbox.List(*root)
	if err != nil {
		return err
	}
	for _, s := range st {
		state := "stale"
		if s.Running {
			state = "running"
		}
		fmt.Fprintf(stdout, "%s\t%d\t%s\t%s\n", s.Name, s.InitPID, state, s.StateDir)
	}
	return nil
}
