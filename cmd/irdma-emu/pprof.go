package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"time"
)

// The daemon's profiling switch (docs/daemon.md "Profiling"): --pprof
// serves Go's net/http/pprof endpoints while the daemon runs, --cpuprofile
// writes a CPU profile of the whole run. Both are off by default and cost
// nothing then.

// profiling is what runProfiling started; stop ends it.
type profiling struct {
	srv     *http.Server
	cpu     *os.File
	started bool
}

// checkPprofAddr validates a --pprof address before anything starts.
func checkPprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--pprof %q: want host:port (port 0 picks one): %v", addr, err)
	}
	return nil
}

// startProfiling starts what the flags ask for. The pprof server's address
// (the port chosen when it was 0) is printed to stdout as
// "irdma-emu: pprof on http://ADDR/debug/pprof/".
func startProfiling(addr, cpuFile string, stdout io.Writer) (*profiling, error) {
	p := &profiling{}
	if cpuFile != "" {
		f, err := os.Create(cpuFile)
		if err != nil {
			return nil, fmt.Errorf("--cpuprofile: %v", err)
		}
		if err := rpprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("--cpuprofile: %v", err)
		}
		p.cpu = f
	}
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("--pprof: %v", err)
		}
		// Mutex and block profiles are empty unless sampled; sample
		// lightly, and only when asked for a profile server at all.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = p.srv.Serve(ln) }()
		fmt.Fprintf(stdout, "irdma-emu: pprof on http://%s/debug/pprof/\n", ln.Addr())
	}
	return p, nil
}

// stop ends the profile server and writes the CPU profile out.
func (p *profiling) stop() error {
	if p == nil {
		return nil
	}
	var errs []error
	if p.srv != nil {
		errs = append(errs, p.srv.Close())
		p.srv = nil
	}
	if p.cpu != nil {
		rpprof.StopCPUProfile()
		errs = append(errs, p.cpu.Close())
		p.cpu = nil
	}
	return errors.Join(errs...)
}
