package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/slicelet/slicelet/units"
)

// Machine describes where the numbers were measured.
type Machine struct {
	CPUs       int
	CPUModel   string
	Memory     string
	Kernel     string
	Systemd    string
	CgroupMode string
	Go         string
	LoadAvg    string
	Commit     string
}

// ReadMachine reads the machine's description; what cannot be read is "unknown".
func ReadMachine(goBin string) Machine {
	m := Machine{
		CPUs:       runtime.NumCPU(),
		CPUModel:   firstField("/proc/cpuinfo", "model name"),
		Memory:     firstField("/proc/meminfo", "MemTotal"),
		Kernel:     firstLine(readFile("/proc/sys/kernel/osrelease")),
		Systemd:    firstLine(output("systemctl", "--version")),
		Go:         firstLine(output(goBin, "env", "GOVERSION")),
		LoadAvg:    loadAvg(),
		Commit:     firstLine(output("git", "describe", "--always", "--dirty")),
		CgroupMode: "unknown",
	}
	if m.Commit != "" && strings.TrimSpace(output("git", "status", "--porcelain", "--untracked-files=normal")) != "" {
		// Untracked files (a new benchmark, say) do not make describe --dirty say so.
		m.Commit += " + uncommitted or untracked changes"
	}
	if mode, err := units.DetectMode(units.DefaultCgroupRoot); err == nil {
		m.CgroupMode = mode.String()
	}
	for _, p := range []*string{&m.CPUModel, &m.Memory, &m.Kernel, &m.Systemd, &m.Go, &m.LoadAvg, &m.Commit} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return m
}

// Markdown is the machine as a bullet list.
func (m Machine) Markdown() string {
	var b strings.Builder
	w := func(k, v string) { b.WriteString("- " + k + ": " + v + "\n") }
	w("CPUs (nproc)", itoa(m.CPUs)+" × "+m.CPUModel)
	w("memory", m.Memory)
	w("kernel", m.Kernel)
	w("systemd", m.Systemd)
	w("cgroup mode", m.CgroupMode+" (the sandbox mirrors the host's layout)")
	w("Go", m.Go)
	w("load average before the run", m.LoadAvg)
	w("commit", m.Commit)
	return b.String()
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

func output(name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return string(b)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// firstField returns the value of the first "key: value" line of a /proc file.
func firstField(path, key string) string {
	sc := bufio.NewScanner(strings.NewReader(readFile(path)))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

// loadAvg is the 1, 5 and 15 minute load average.
func loadAvg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	return strings.Join(f[:min(3, len(f))], " ")
}
