package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// TestFlagPositions: the global flags work before and after the verb, attached (-oname,
// -nkube-system), as --flag=value and as --flag value.
func TestFlagPositions(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"socket before the verb", []string{"--socket", sock, "get", "pods", "-o", "name"}, "pod/big\npod/crash\npod/static\npod/web\n"},
		{"socket= after the names", []string{"get", "pods", "-o", "name", "--socket=" + sock}, "pod/big\npod/crash\npod/static\npod/web\n"},
		{"attached -o", []string{"get", "pods", "-oname", "--socket", sock}, "pod/big\npod/crash\npod/static\npod/web\n"},
		{"-o between verb and resource", []string{"get", "-oname", "pods", "--socket", sock}, "pod/big\npod/crash\npod/static\npod/web\n"},
		{"attached -n before the verb", []string{"-nkube-system", "--socket", sock, "get", "pods", "-oname"}, "pod/dns\n"},
		{"--namespace= after", []string{"get", "pods", "--namespace=kube-system", "--output=name", "--socket", sock}, "pod/dns\n"},
		{"-n value before the verb", []string{"-n", "kube-system", "get", "pods", "-o", "name", "--socket", sock}, "pod/dns\n"},
		{"-A before the verb", []string{"-A", "-o", "name", "get", "pods", "--socket", sock}, "pod/big\npod/crash\npod/static\npod/web\npod/dns\n"},
		{"--all-namespaces after", []string{"get", "pods", "--all-namespaces", "-oname", "--socket", sock}, "pod/big\npod/crash\npod/static\npod/web\npod/dns\n"},
		{"-- ends the flags", []string{"--socket", sock, "-oname", "get", "--", "pod", "web"}, "pod/web\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 0 || out != tc.want {
				t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr:\n%s", code, out, tc.want, errOut)
			}
		})
	}
}

// TestUsageErrors: unknown verbs, subjects and flags are named, with a suggestion, and exit 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown verb", []string{"gett", "pods"}, `unknown command "gett" for "slicectl"; did you mean "get"?`},
		{"unknown verb far from any", []string{"frobnicate"}, `unknown command "frobnicate" for "slicectl"` + "\n"},
		{"unknown flag", []string{"get", "pods", "--outptu", "json"}, `slicectl get: unknown flag: --outptu; did you mean --output?`},
		{"unknown shorthand", []string{"get", "pods", "-Z"}, `unknown shorthand flag: 'Z' in -Z`},
		{"unknown explain subject", []string{"explain", "pdo"}, `explain: unknown subject "pdo" (pod, node, gc or eviction); did you mean "pod"?`},
		{"flag without value", []string{"get", "pods", "-o"}, `flag needs an argument: 'o' in -o`},
		{"bad int", []string{"logs", "web", "--tail", "many"}, `invalid argument "many" for "--tail"`},
		{"version takes no argument", []string{"version", "now"}, `unknown command "now" for "slicectl version"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d (want %d), stderr %q lacks %q; stdout %q", code, exitUsage, errOut, tc.want, out)
			}
		})
	}
}

// TestHelpGolden compares every command's --help with testdata/help (go test -update rewrites).
func TestHelpGolden(t *testing.T) {
	for _, args := range [][]string{
		{}, {"get"}, {"describe"}, {"apply"}, {"delete"}, {"logs"}, {"node"}, {"top"}, {"top", "pods"},
		{"top", "node"}, {"gc"}, {"explain"}, {"explain", "pod"}, {"explain", "node"}, {"explain", "gc"},
		{"explain", "gc", "images"}, {"explain", "eviction"}, {"version"}, {"completion"},
	} {
		name := strings.Join(append([]string{"slicectl"}, args...), "_")
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(args, "--help")...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			golden(t, filepath.Join("testdata", "help", name+".txt"), out)
		})
	}
}

// golden compares got with the file, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
