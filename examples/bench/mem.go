package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// heapObjectsMetric is the live-and-unswept heap object bytes: what the Go
// heap holds, Arrow buffers included (arrow-go's default allocator is the Go
// allocator).
const heapObjectsMetric = "/memory/classes/heap/objects:bytes"

// procStatusKB reads a "Name:   1234 kB" field of /proc/self/status in
// bytes; 0 when unavailable (not Linux).
func procStatusKB(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	prefix := []byte(name + ":")
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		f := bytes.Fields(line[len(prefix):])
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// resetPeakRSS returns the heap's free memory to the OS and resets the
// process's peak RSS (VmHWM) to its current RSS by writing 5 to
// /proc/self/clear_refs (Linux >= 4.0), so that the next phase's VmHWM is
// its own. It reports whether the reset worked; when it did not, VmHWM stays
// the peak of the whole process so far.
func resetPeakRSS() bool {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_, werr := f.Write([]byte("5"))
	cerr := f.Close()
	return werr == nil && cerr == nil
}

// heapSampler samples the Go heap every interval in its own goroutine and
// keeps the maximum. stop ends and joins the goroutine.
type heapSampler struct {
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak uint64
}

func startHeapSampler(interval time.Duration) *heapSampler {
	h := &heapSampler{quit: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: heapObjectsMetric}}
	read := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		v := sample[0].Value.Uint64()
		h.mu.Lock()
		h.peak = max(h.peak, v)
		h.mu.Unlock()
	}
	read()
	go func() {
		defer close(h.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-h.quit:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return h
}

// stop joins the sampling goroutine and returns the peak heap in bytes.
func (h *heapSampler) stop() uint64 {
	close(h.quit)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

// processCPU is the user+system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ctxSwitches counts the context switches of a process (or of several):
// Voluntary ones are waits (a read with nothing to read, a full socket, a
// lock), involuntary ones are preemptions.
type ctxSwitches struct {
	Voluntary   int64 `json:"voluntary"`
	Involuntary int64 `json:"involuntary"`
}

func (c ctxSwitches) sub(d ctxSwitches) ctxSwitches {
	return ctxSwitches{c.Voluntary - d.Voluntary, c.Involuntary - d.Involuntary}
}

// processCtxSwitches is the context switches of this process, all threads.
func processCtxSwitches() ctxSwitches {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return ctxSwitches{}
	}
	return ctxSwitches{int64(ru.Nvcsw), int64(ru.Nivcsw)}
}

// pidCtxSwitches is the context switches of another local process, from
// /proc/<pid>/status; ok=false when it cannot be read.
func pidCtxSwitches(pid int) (c ctxSwitches, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return c, false
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		var dst *int64
		switch k {
		case "voluntary_ctxt_switches":
			dst = &c.Voluntary
		case "nonvoluntary_ctxt_switches":
			dst = &c.Involuntary
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return c, false
		}
		*dst = n
		found++
	}
	return c, found == 2
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux
// for every architecture Go supports).
const clockTicks = 100

// pidCPU is the user+system CPU time of another local process, from
// /proc/<pid>/stat; ok=false when it cannot be read.
func pidCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces: fields count from ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / clockTicks, true
}
