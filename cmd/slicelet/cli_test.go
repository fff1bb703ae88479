package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/config"
)

// TestMain lets the test binary act as slicelet itself, so that exit codes are
// checked through a real process.
func TestMain(m *testing.M) {
	if os.Getenv("SLICELET_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"slicelet"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	good := write(t, dir, "good/config.toml", "[eviction]\npressure_transition_period = \"1m\"\n")
	tooBig := write(t, dir, "toobig/config.toml", "state_dir = "+strconv.Quote(filepath.Join(dir, "state"))+"\n[node]\nsystem_reserved = { memory = \"100Ti\" }\n")
	goodDropIn := write(t, dir, "good/config.d/10-log.toml", "[log]\nlevel = \"debug\"\n")
	bad := write(t, dir, "bad/config.toml", "[node]\nmax_pods = \"many\"\n[eviction]\nhard = { \"mem.available\" = \"1Gi\" }\nsoft = { \"memory.available\" = \"1Gi\" }\n[gc.images]\nlow_threshold_percent = 90\n")
	malformed := write(t, dir, "malformed/config.toml", "[node\n")
	missing := filepath.Join(dir, "missing", "config.toml")

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // substrings
		wantStderr []string // substrings
	}{
		{
			name:       "check good with drop-in",
			args:       []string{"config", "check", "--config", good},
			wantCode:   0,
			wantStdout: []string{"config OK: " + good + ", " + goodDropIn},
		},
		{
			name:       "global --config before the command",
			args:       []string{"--config", good, "config", "check"},
			wantCode:   0,
			wantStdout: []string{"config OK: " + good},
		},
		{
			name:     "check bad lists every problem with its location",
			args:     []string{"config", "check", "--config", bad},
			wantCode: 1,
			wantStderr: []string{
				bad + ":2:1: node.max_pods: wrong type: got string, want integer\n",
				bad + `:4:10: eviction.hard."mem.available": unsupported eviction signal mem.available` + "\n",
				bad + `:5:10: eviction.soft."memory.available": grace period must be specified for the soft eviction threshold memory.available` + "\n",
				bad + ":7:1: gc.images.low_threshold_percent: LowThresholdPercent 90 can not be higher than HighThresholdPercent 85\n",
				"config: 4 problems\n",
			},
		},
		{
			name:       "check malformed",
			args:       []string{"config", "check", "--config", malformed},
			wantCode:   1,
			wantStderr: []string{malformed + ":", "config: 1 problem\n"},
		},
		{
			name:       "check missing explicit file",
			args:       []string{"config", "check", "--config", missing},
			wantCode:   1,
			wantStderr: []string{missing + ": configuration file not found"},
		},
		{
			name:       "print bad refuses",
			args:       []string{"config", "print", "--config", bad},
			wantCode:   1,
			wantStderr: []string{"config: 4 problems"},
		},
		{
			name:       "print good",
			args:       []string{"config", "print", "--config", good},
			wantCode:   0,
			wantStdout: []string{"pressure_transition_period = \"1m0s\"", "level = \"debug\"", "[gc.images]\nhigh_threshold_percent = 85\n"},
		},
		{
			name:       "unknown command",
			args:       []string{"frobnicate"},
			wantCode:   2,
			wantStderr: []string{`unknown command "frobnicate"`, "Run 'slicelet --help' for usage."},
		},
		{
			name:       "unknown command close to one",
			args:       []string{"confg", "check"},
			wantCode:   2,
			wantStderr: []string{`unknown command "confg" for "slicelet"; did you mean "config"?`},
		},
		{
			name:       "unknown config subcommand close to one",
			args:       []string{"config", "chek"},
			wantCode:   2,
			wantStderr: []string{`unknown subcommand "chek" (want check or print); did you mean "check"?`},
		},
		{
			name:       "--flag=value after the command",
			args:       []string{"config", "check", "--config=" + good},
			wantCode:   0,
			wantStdout: []string{"config OK: " + good},
		},
		{
			name:       "--version",
			args:       []string{"--version"},
			wantCode:   0,
			wantStdout: []string{"slicelet ", "git commit: ", "build date: ", "go version: go"},
		},
		{
			name:       "per-command help with examples",
			args:       []string{"config", "check", "--help"},
			wantCode:   0,
			wantStdout: []string{"Usage:\n  slicelet config check [flags]", "Examples:\n  slicelet config check --config /etc/slicelet/config.toml", "--log-level string"},
		},
		{
			name:       "unknown config subcommand",
			args:       []string{"config", "lint"},
			wantCode:   2,
			wantStderr: []string{`unknown subcommand "lint"`},
		},
		{
			name:       "config without subcommand",
			args:       []string{"config"},
			wantCode:   2,
			wantStderr: []string{"usage: slicelet config check|print"},
		},
		{
			name:       "unknown flag",
			args:       []string{"config", "check", "--confg", good},
			wantCode:   2,
			wantStderr: []string{"unknown flag: --confg"},
		},
		{
			name:       "stray argument",
			args:       []string{"config", "check", good},
			wantCode:   2,
			wantStderr: []string{"unexpected argument"},
		},
		{
			name:       "invalid --log-level",
			args:       []string{"--log-level", "loud", "config", "check", "--config", good},
			wantCode:   2,
			wantStderr: []string{`--log-level: invalid log level "loud"`},
		},
		{
			name:       "run refuses a bad configuration",
			args:       []string{"run", "--config", bad},
			wantCode:   1,
			wantStderr: []string{"slicelet run: nothing started: 4 problems"},
		},
		{
			name:       "run refuses a reservation above capacity before touching systemd",
			args:       []string{"--config", tooBig, "--log-format", "text"},
			wantCode:   1,
			wantStderr: []string{`slicelet run: node allocatable reservation: Resource "memory" has a reservation of`, "Expected capacity >= reservation."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			for _, s := range tc.wantStdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}

func TestPrintLoadsBack(t *testing.T) {
	dir := t.TempDir()
	src := write(t, dir, "config.toml", "[node]\nsystem_reserved = { cpu = \"250m\", memory = \"1Gi\" }\n[eviction]\nsoft = { \"memory.available\" = \"2Gi\" }\nsoft_grace_period = { \"memory.available\" = \"1m30s\" }\n")
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"config", "print", "--config", src}, &stdout, &stderr); code != 0 {
		t.Fatalf("print exit %d: %s", code, stderr.String())
	}
	printed := write(t, t.TempDir(), "config.toml", stdout.String())
	stdout.Reset()
	if code := cli([]string{"config", "print", "--config", printed}, &stdout, &stderr); code != 0 {
		t.Fatalf("printed configuration does not load: %s", stderr.String())
	}
	first, err := os.ReadFile(printed)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(first) {
		t.Errorf("print of print differs:\n%s\n---\n%s", first, stdout.String())
	}
}

// TestExitCodes runs the real binary (this test binary acting as main).
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := write(t, dir, "config.toml", "[eviction]\nhard = { \"memory.available\" = \"-1\" }\nbogus = true\n")
	packaged := filepath.Join("..", "..", "packaging", "config.toml")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOutput string
	}{
		{"bad file", []string{"config", "check", "--config", bad}, 1, bad + ":3:1: eviction.bogus: unknown key"},
		{"packaged example", []string{"config", "check", "--config", packaged}, 0, "config OK: " + packaged},
		{"usage error", []string{"nope"}, 2, "unknown command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, tc.args...)
			cmd.Env = append(os.Environ(), "SLICELET_TEST_AS_MAIN=1")
			out, err := cmd.CombinedOutput()
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			if !strings.Contains(string(out), tc.wantOutput) {
				t.Errorf("output lacks %q:\n%s", tc.wantOutput, out)
			}
		})
	}
}

// The default path constant is what the packaging installs.
func TestDefaultPath(t *testing.T) {
	if config.DefaultPath != "/etc/slicelet/config.toml" {
		t.Errorf("DefaultPath = %q", config.DefaultPath)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/help_*.txt")

// TestHelpGolden compares the help of every command with testdata (go test -update rewrites).
func TestHelpGolden(t *testing.T) {
	for _, args := range [][]string{{}, {"run"}, {"config"}, {"config", "check"}, {"config", "print"}} {
		name := "help_" + strings.Join(append([]string{"slicelet"}, args...), "_") + ".txt"
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(append(args, "--help"), &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("exit %d, stderr %s", code, stderr.String())
			}
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if stdout.String() != string(want) {
				t.Errorf("%s differs (go test -update rewrites it):\n%s", path, stdout.String())
			}
		})
	}
}
