package crashtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// proc supervises one worker process: it restarts it, with a new
// incarnation, each time it dies, until stopped. TestCrash's harness and
// TestScaleOut's both run their workers through it.
type proc struct {
	t    testing.TB
	dir  string // where the incarnations' logs go
	name string
	role string
	args []string
	// command returns the command of incarnation inc (its arguments and
	// environment); start runs it with its output to the incarnation's log.
	command func(p *proc, inc int) *exec.Cmd
	// report is told of each exit: the incarnation, its log, and the
	// failure it was ("" for an expected exit).
	report func(name string, log logScan, failure string)
	// restartDelay, when set, is how long to wait before a restart (the
	// scale-out harness restarts after 0-2 s); nil restarts at once.
	restartDelay func() time.Duration
	// started and ended, when set, are told of each incarnation's start
	// and exit (the scale-out harness records them).
	started, ended func(p *proc, inc int)
	final          atomic.Bool // restart without kill points

	mu       sync.Mutex
	inc      int
	cmd      *exec.Cmd
	ours     bool // the running incarnation got a SIGKILL from the harness
	termed   bool // the running incarnation got a SIGTERM and will be restarted
	stopped  bool // the running incarnation is SIGSTOPped
	stopping bool
	kills    int // external SIGKILLs
	deaths   int // exits by SIGKILL (external and kill points)
	done     chan struct{}
}

func (p *proc) logPath(inc int) string {
	return filepath.Join(p.dir, fmt.Sprintf("%s-%d.log", p.name, inc))
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return errStopped
	}
	p.inc++
	p.ours, p.termed, p.stopped = false, false, false
	cmd := p.command(p, p.inc)
	logf, err := os.Create(p.logPath(p.inc))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p.cmd = cmd
	inc := p.inc
	if p.started != nil {
		p.started(p, inc)
	}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		p.exited(cmd, inc)
	}()
	return nil
}

var errStopped = errors.New("stopped")

// exited is called when cmd has exited; it accounts for the exit and
// restarts the process unless it is stopping. Expected exits are a
// SIGKILL from the harness or from a kill point, and status 0 after the
// harness's SIGTERM; any other exit, and any race report in the log, is a
// failure of the run.
func (p *proc) exited(cmd *exec.Cmd, inc int) {
	if p.ended != nil {
		p.ended(p, inc)
	}
	p.mu.Lock()
	log := scanLog(p.logPath(inc))
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL
	var failure string
	switch {
	case log.race != "":
		failure = "a race report"
	case killed && (p.ours || log.point != ""):
		p.deaths++
	case killed:
		failure = "SIGKILL from outside the harness"
	case !cmd.ProcessState.Success():
		failure = "an unexpected exit"
	case !p.stopping && !p.termed:
		failure = "an exit the harness did not ask for"
	}
	name := fmt.Sprintf("%s incarnation %d (%s)", p.name, inc, cmd.ProcessState)
	stopping := p.stopping
	p.cmd = nil
	p.mu.Unlock()
	p.report(name, log, failure)
	if stopping {
		close(p.done)
		return
	}
	if p.restartDelay != nil {
		time.Sleep(p.restartDelay())
	}
	if err := p.start(); err != nil {
		if !errors.Is(err, errStopped) {
			p.t.Errorf("restart %s: %v", p.name, err)
		}
		close(p.done)
	}
}

// signal sends sig to the running incarnation and reports whether there
// was one; a SIGTERM marks its clean exit as expected (it is restarted).
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return false
	}
	switch sig {
	case syscall.SIGKILL:
		p.kills++
		p.ours = true
	case syscall.SIGTERM:
		p.termed = true
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig) == nil
}

// running returns the running incarnation, 0 if none.
func (p *proc) running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.inc
}

// stop makes p stop: SIGTERM to the running incarnation (a clean stop),
// and no restart; it waits for the exit.
func (p *proc) stop(tb testing.TB, timeout time.Duration) {
	p.mu.Lock()
	p.stopping = true
	running, stopped := p.cmd != nil, p.stopped
	p.mu.Unlock()
	if stopped {
		p.signal(syscall.SIGCONT)
	}
	if running {
		p.signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		tb.Errorf("%s did not stop within %v; killing it", p.name, timeout)
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// resume starts a stopped p again, with its next incarnation.
func (p *proc) resume() error {
	p.mu.Lock()
	p.stopping = false
	p.done = make(chan struct{})
	p.mu.Unlock()
	return p.start()
}

// restartClean kills p and lets it come back without kill points.
func (p *proc) restartClean() {
	p.final.Store(true)
	p.signal(syscall.SIGKILL)
}

// logName names the running incarnation's log file.
func (p *proc) logName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%s-%d.log", p.name, p.inc)
}
