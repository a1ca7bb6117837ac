package loadtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Placement is where a run's processes ran, for the report.
type Placement struct {
	Pinned      bool   `json:"pinned"`
	Via         string `json:"via,omitempty"`          // "taskset" when pinned
	Allowed     string `json:"allowed_cpus,omitempty"` // the harness's CPUs at the start
	ServiceCPUs string `json:"service_cpus,omitempty"` // the service and the bare server
	LoadCPUs    string `json:"load_cpus,omitempty"`    // the harness and redis-server
	// Note says why nothing was pinned, or what the check of the harness's
	// threads found.
	Note string `json:"note,omitempty"`
}

func (p Placement) describe() string {
	switch {
	case p.Pinned:
		return fmt.Sprintf("the service and the bare handler pinned to CPU %s, the harness and redis-server to CPU %s (%s)", p.ServiceCPUs, p.LoadCPUs, p.Via)
	case p.Note != "":
		return "not pinned: " + p.Note + " (the harness shares the cores with the service and anything else running)"
	}
	return "the harness shares the cores with the service and anything else running"
}

// cpuPlan is a run's placement of its processes while it is in force. The
// zero value pins nothing.
//
// # Why and how
//
// On a machine of a few cores the service, the load generator (this
// process: the workers, the checker, the feed) and redis-server compete for
// the same cores, and which of them the scheduler favours changes from one
// configuration to the next. A managed run therefore pins the service (and
// the bare server, which stands in for it) to cores of its own, the upper
// half of the cores this process may use, and the harness and redis-server
// to the others: on 2 cores, the service on CPU 1, everything else on CPU 0.
//
// Pinning uses taskset (util-linux): a child is started as
// `taskset -c LIST bin args...`, which sets the affinity and then execs, so
// every thread the child ever makes inherits it and the pid is the child's
// own; the harness pins its running threads with `taskset -a -p -c LIST PID`
// (threads made later inherit from their pinned creators) and checks every
// thread's Cpus_allowed_list afterwards. golang.org/x/sys would need go.mod
// to name it directly, and a child cannot be pinned race-free after it
// started. Without taskset, with a single core, or in an external run (the
// services are not ours), nothing is pinned and the report says why.
//
// A Go service sizes GOMAXPROCS from its affinity, so a service pinned to
// one core runs one P: figures of pinned and unpinned runs are not
// comparable with each other (the report's comparability notes say so).
type cpuPlan struct {
	taskset       string // the taskset binary; "" when nothing is pinned
	allowed       []int  // the harness's CPUs before pinning (restored at the end)
	service, load []int
}

// planCPUs splits allowed between the service (the upper half, rounded
// down) and the load (the rest). It returns the zero plan and the reason
// when nothing can be pinned.
func planCPUs(allowed []int, taskset string, disabled bool) (cpuPlan, string) {
	switch {
	case disabled:
		return cpuPlan{}, "pinning disabled (--no-pin)"
	case len(allowed) < 2:
		return cpuPlan{}, fmt.Sprintf("%d CPU available: nothing to pin apart", len(allowed))
	case taskset == "":
		return cpuPlan{}, "taskset (util-linux) not found on PATH: nothing pinned"
	}
	split := len(allowed) - len(allowed)/2
	return cpuPlan{taskset: taskset, allowed: slices.Clone(allowed),
		load: slices.Clone(allowed[:split]), service: slices.Clone(allowed[split:])}, ""
}

func (p cpuPlan) pinned() bool { return p.taskset != "" }

// command returns the command line that runs bin with args on cpus (bin
// itself when nothing is pinned).
func (p cpuPlan) command(cpus []int, bin string, args []string) (string, []string) {
	if !p.pinned() || len(cpus) == 0 {
		return bin, args
	}
	return p.taskset, append([]string{"-c", formatCPUList(cpus), bin}, args...)
}

// pinAll sets the affinity of every thread of pid to cpus and checks that
// each thread has it: a thread made while taskset walked the list may have
// been missed, so it tries a few times.
func (p cpuPlan) pinAll(pid int, cpus []int) error {
	want := formatCPUList(cpus)
	var last error
	for range 3 {
		out, err := exec.Command(p.taskset, "-a", "-p", "-c", want, strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("taskset -a -p -c %s %d: %w: %s", want, pid, err, bytes.TrimSpace(out))
		}
		lists, err := threadCPUs(pid)
		if err != nil {
			return err
		}
		if len(lists) == 1 && lists[0] == want {
			return nil
		}
		last = fmt.Errorf("threads of %d on CPUs %v after pinning to %s", pid, lists, want)
	}
	return last
}

// threadCPUs returns the distinct Cpus_allowed_list values of pid's
// threads, sorted.
func threadCPUs(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lists []string
	for _, e := range ents {
		status, err := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return nil, err
		}
		l, err := parseCPUsAllowed(status)
		if err != nil {
			return nil, fmt.Errorf("%s/%s/status: %w", dir, e.Name(), err)
		}
		if !slices.Contains(lists, l) {
			lists = append(lists, l)
		}
	}
	slices.Sort(lists)
	return lists, nil
}

// allowedCPUs returns the CPUs pid may run on (its main thread's
// Cpus_allowed_list).
func allowedCPUs(pid int) ([]int, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	l, err := parseCPUsAllowed(status)
	if err != nil {
		return nil, err
	}
	return parseCPUList(l)
}

// parseCPUsAllowed returns the Cpus_allowed_list field of a
// /proc/<pid>/status file ("0-1,4").
func parseCPUsAllowed(status []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == "Cpus_allowed_list" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("no Cpus_allowed_list")
}

// parseCPUList parses the kernel's CPU list format: comma-separated CPUs
// and inclusive ranges ("0-3,8,10-11"), into sorted distinct CPUs.
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// formatCPUList renders sorted distinct CPUs as the kernel does: runs of
// consecutive CPUs as ranges ("0-3,8").
func formatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
