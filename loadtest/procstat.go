package loadtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture the harness runs on (the kernel fixes the
// user-visible value independently of CONFIG_HZ); reading it would need cgo
// (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// procSample is what /proc says about one process at one moment.
type procSample struct {
	at       time.Time
	cpu      time.Duration // utime + stime
	rssBytes int64         // VmRSS
	hwmBytes int64         // VmHWM: peak RSS over the process's life
	cpus     string        // Cpus_allowed_list of its main thread
}

// readProc reads /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.cpu, err = parseProcStat(stat); err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	s.rssBytes, s.hwmBytes, err = parseProcStatus(status)
	if err != nil {
		return s, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	s.cpus, _ = parseCPUsAllowed(status) // informative only
	return s, nil
}

// parseProcStat returns utime + stime from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted after the last ')': there, field 3
// (state) is index 0, utime (14) index 11 and stime (15) index 12.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command field")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// parseProcStatus returns VmRSS and VmHWM in bytes.
func parseProcStatus(b []byte) (rss, hwm int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	found := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("%s: %q", k, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("no VmRSS and VmHWM")
	}
	return rss, hwm, nil
}

// ProcStats is a process's resource use over a phase.
type ProcStats struct {
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpu_seconds"` // user + system
	CPUCores   float64 `json:"cpu_cores"`   // CPUSeconds / wall seconds
	RSSPeak    int64   `json:"rss_peak_bytes"`
	RSSEnd     int64   `json:"rss_end_bytes"`
	// CPUs the process was allowed to run on at the phase's end (its
	// main thread's Cpus_allowed_list): where a pinned run placed it.
	CPUs string `json:"cpus,omitempty"`
}

// procWatch samples a process's RSS every quarter second between start and
// stop, to report the phase's peak (VmHWM is the whole life's peak).
type procWatch struct {
	pid   int
	first procSample
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	peak int64 // guarded by mu
}

// watchProc starts sampling pid; it returns nil for pid 0 (a process the
// harness did not start) or when /proc cannot be read.
func watchProc(pid int) *procWatch {
	if pid <= 0 {
		return nil
	}
	first, err := readProc(pid)
	if err != nil {
		return nil
	}
	w := &procWatch{pid: pid, first: first, stop: make(chan struct{}), done: make(chan struct{}), peak: first.rssBytes}
	go func() {
		defer close(w.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				if s, err := readProc(pid); err == nil {
					w.mu.Lock()
					w.peak = max(w.peak, s.rssBytes)
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

// finish stops sampling and returns the stats since watchProc.
func (w *procWatch) finish() *ProcStats {
	if w == nil {
		return nil
	}
	close(w.stop)
	<-w.done
	last, err := readProc(w.pid)
	if err != nil {
		return nil
	}
	w.mu.Lock()
	peak := max(w.peak, last.rssBytes)
	w.mu.Unlock()
	st := &ProcStats{PID: w.pid, CPUSeconds: (last.cpu - w.first.cpu).Seconds(), RSSPeak: peak, RSSEnd: last.rssBytes, CPUs: last.cpus}
	if wall := last.at.Sub(w.first.at).Seconds(); wall > 0 {
		st.CPUCores = st.CPUSeconds / wall
	}
	return st
}
