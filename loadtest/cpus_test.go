package loadtest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		out  string
	}{
		{"0", []int{0}, "0"},
		{"0-1", []int{0, 1}, "0-1"},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{" 2,1,1,3 ", []int{1, 2, 3}, "1-3"},
		{"5,7,9", []int{5, 7, 9}, "5,7,9"},
	} {
		got, err := parseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		if s := formatCPUList(got); s != c.out {
			t.Errorf("formatCPUList(%v) = %q, want %q", got, s, c.out)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1-", "1,,2", "0-x"} {
		if got, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", bad, got)
		}
	}
	status := []byte("Name:\tutxo-cache\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n")
	if l, err := parseCPUsAllowed(status); err != nil || l != "0-1" {
		t.Errorf("parseCPUsAllowed = %q, %v", l, err)
	}
	if _, err := parseCPUsAllowed([]byte("Name:\tx\n")); err == nil {
		t.Error("status without Cpus_allowed_list accepted")
	}
}

func TestPlanCPUs(t *testing.T) {
	for _, c := range []struct {
		allowed       []int
		taskset       string
		disabled      bool
		service, load []int
		why           string
	}{
		{[]int{0, 1}, "/usr/bin/taskset", false, []int{1}, []int{0}, ""},
		{[]int{0, 1, 2}, "/usr/bin/taskset", false, []int{2}, []int{0, 1}, ""},
		{[]int{0, 1, 2, 3}, "/usr/bin/taskset", false, []int{2, 3}, []int{0, 1}, ""},
		{[]int{2, 5}, "/usr/bin/taskset", false, []int{5}, []int{2}, ""},
		{[]int{0}, "/usr/bin/taskset", false, nil, nil, "1 CPU available: nothing to pin apart"},
		{[]int{0, 1}, "", false, nil, nil, "taskset (util-linux) not found on PATH: nothing pinned"},
		{[]int{0, 1}, "/usr/bin/taskset", true, nil, nil, "pinning disabled (--no-pin)"},
	} {
		p, why := planCPUs(c.allowed, c.taskset, c.disabled)
		if why != c.why || p.pinned() != (c.why == "") || !slices.Equal(p.service, c.service) || !slices.Equal(p.load, c.load) {
			t.Errorf("planCPUs(%v, %q, %v) = service %v load %v pinned %v, %q; want %v %v, %q",
				c.allowed, c.taskset, c.disabled, p.service, p.load, p.pinned(), why, c.service, c.load, c.why)
		}
	}
	bin, args := cpuPlan{}.command([]int{1}, "serve", []string{"--x"})
	if bin != "serve" || !slices.Equal(args, []string{"--x"}) {
		t.Errorf("the zero plan wraps: %s %v", bin, args)
	}
	p, _ := planCPUs([]int{0, 1}, "/usr/bin/taskset", false)
	bin, args = p.command(p.service, "serve", []string{"--x"})
	if bin != "/usr/bin/taskset" || !slices.Equal(args, []string{"-c", "1", "serve", "--x"}) {
		t.Errorf("pinned command: %s %v", bin, args)
	}
}

// TestPinProcesses pins real processes with taskset and reads their
// affinity back from /proc: a child started on the service's CPUs, then
// every thread of it moved to the load's.
func TestPinProcesses(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("no taskset")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	allowed, err := allowedCPUs(1) // init's, not this test's: go test may run pinned
	if err != nil {
		t.Skip(err)
	}
	plan, why := planCPUs(allowed, taskset, false)
	if !plan.pinned() {
		t.Skip(why)
	}
	bin, args := plan.command(plan.service, sleep, []string{"60"})
	p, err := startProcess("sleep", t.TempDir()+"/sleep.log", bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(time.Second)
	// taskset sets the affinity, then execs: wait for the exec, whose
	// command name is sleep's. The name is read first: once it is sleep's
	// the affinity is final (read the other way round, the affinity could
	// be taskset's from before it set it, with the name read after the
	// exec).
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		if procName(p.pid()) == "sleep" {
			if s, err := readProc(p.pid()); err == nil {
				got = []string{s.cpus}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never became sleep")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := formatCPUList(plan.service); got[0] != want {
		t.Fatalf("child on CPUs %v, want %s", got, want)
	}
	if err := plan.pinAll(p.pid(), plan.load); err != nil {
		t.Fatal(err)
	}
	if lists, err := threadCPUs(p.pid()); err != nil || !slices.Equal(lists, []string{formatCPUList(plan.load)}) {
		t.Fatalf("after pinAll: threads on %v, %v; want %s", lists, err, formatCPUList(plan.load))
	}
}

// procName is pid's command name (/proc/<pid>/comm), "" when unreadable.
func procName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
