package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
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
	v, ok := procStatusFields("/proc/self/status", name)
	if !ok {
		return 0
	}
	return v[0] << 10
}

// procStatusFields reads the numbers of the named fields ("Name:   1234
// ...") of a /proc/<pid>/status file, in the order asked; ok=false when
// the file or a field cannot be read.
func procStatusFields(path string, names ...string) ([]int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	out := make([]int64, len(names))
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := bytes.Cut(sc.Bytes(), []byte(":"))
		i := slices.Index(names, string(k))
		if i < 0 {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			return nil, false
		}
		if out[i], err = strconv.ParseInt(string(f[0]), 10, 64); err != nil {
			return nil, false
		}
		found++
	}
	return out, found == len(names)
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

func (c ctxSwitches) add(d ctxSwitches) ctxSwitches {
	return ctxSwitches{c.Voluntary + d.Voluntary, c.Involuntary + d.Involuntary}
}

// processUsage is the user+system CPU time and the context switches of
// this process, all threads.
func processUsage() (time.Duration, ctxSwitches) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, ctxSwitches{}
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ctxSwitches{int64(ru.Nvcsw), int64(ru.Nivcsw)}
}

// pidCtxSwitches is the context switches of another local process, from
// /proc/<pid>/status; ok=false when it cannot be read.
func pidCtxSwitches(pid int) (ctxSwitches, bool) {
	v, ok := procStatusFields("/proc/"+strconv.Itoa(pid)+"/status", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
	if !ok {
		return ctxSwitches{}, false
	}
	return ctxSwitches{v[0], v[1]}, true
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
