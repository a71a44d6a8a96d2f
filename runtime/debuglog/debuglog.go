// Package debuglog writes NCCL_DEBUG output in NCCL's line shapes, filtered
// by NCCL_DEBUG (level) and NCCL_DEBUG_SUBSYS (subsystems), to stderr or to
// the file NCCL_DEBUG_FILE names.
//
//	p, err := param.Load(os.LookupEnv)
//	...
//	log, err := debuglog.New(p, hostname, os.Getpid(), rank)
//	...
//	defer log.Close()
//	if log.Enabled(param.DebugInfo, param.SubsysTuning) {
//		log.Info(param.SubsysTuning, "AllReduce %d bytes -> %s/%s, %d channels", n, algo, proto, nch)
//	}
//
// Lines, as NCCL 2.30 prints them (src/debug.cc), with the communicator
// rank where NCCL prints the CUDA device:
//
//	VERSION  msg
//	INFO     host:pid:tid [rank] NCCL INFO msg
//	WARN     \n[YYYY-MM-DD hh:mm:ss] host:pid:tid [rank] file.go:line (pkg.func) NCCL WARN msg
//	TRACE    host:pid:tid [rank] ms func:line NCCL TRACE msg      (ms since New)
//	TRACE    host:pid:tid NCCL CALL msg                           (subsystem CALL)
//
// WARN lines start with an empty line and carry a local-time stamp, NCCL's
// defaults for NCCL_DEBUG_TIMESTAMP_LEVELS/FORMAT (which we do not read).
// host is the host name up to its first '.', with '%' and '/' replaced by
// '-', as NCCL's getHostName does. Go does not expose OS thread ids in a way
// that means anything for goroutines, so tid is always 0.
//
// Unlike NCCL, the default destination is stderr, not stdout: cc-perf prints
// the nccl-tests table on stdout and it must stay parseable.
//
// A Logger is safe for concurrent use: each line is formatted first and then
// written with a single Write under one mutex, so lines never interleave.
// Write errors are dropped (there is nowhere to report them). A nil *Logger
// is valid and logs nothing.
package debuglog

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/param"
)

// tid stands in for NCCL's OS thread id; see the package doc.
const tid = 0

// warnTimeFormat is NCCL's default NCCL_DEBUG_TIMESTAMP_FORMAT "[%F %T] ".
const warnTimeFormat = "[2006-01-02 15:04:05] "

// Logger writes NCCL_DEBUG lines. Create it with New or NewWriter.
type Logger struct {
	level  param.DebugLevel
	mask   param.Subsys
	prefix string // "host:pid:tid "
	rank   int
	start  time.Time
	now    func() time.Time // time.Now; tests replace it

	mu       sync.Mutex
	w        io.Writer
	file     *os.File // opened by New, closed by Close
	lastWarn string
}

// New returns a Logger configured from p's NCCL_DEBUG, NCCL_DEBUG_SUBSYS and
// NCCL_DEBUG_FILE. The file, when set, is expanded (see ExpandFile) and
// created or truncated, but only when NCCL_DEBUG is above VERSION, as in
// NCCL; otherwise lines go to stderr. Unlike NCCL, a file that cannot be
// created is an error rather than a silent switch to the default stream.
func New(p *param.Params, host string, pid, rank int) (*Logger, error) {
	l := NewWriter(os.Stderr, p, host, pid, rank)
	if p.Debug > param.DebugVersion && p.DebugFile != "" {
		path := ExpandFile(p.DebugFile, host, pid)
		if path != "" {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
			if err != nil {
				return nil, fmt.Errorf("NCCL_DEBUG_FILE=%q: %w", p.DebugFile, err)
			}
			l.w, l.file = f, f
		}
	}
	return l, nil
}

// NewWriter returns a Logger configured from p's level and subsystems that
// writes to w, ignoring NCCL_DEBUG_FILE. Tests and embedders use it.
func NewWriter(w io.Writer, p *param.Params, host string, pid, rank int) *Logger {
	now := time.Now
	return &Logger{
		level:  p.Debug,
		mask:   p.DebugSubsys,
		prefix: logHost(host) + ":" + strconv.Itoa(pid) + ":" + strconv.Itoa(tid) + " ",
		rank:   rank,
		start:  now(),
		now:    now,
		w:      w,
	}
}

// ExpandFile expands an NCCL_DEBUG_FILE pattern as NCCL does: %h becomes the
// host name (up to its first '.', '%' and '/' replaced by '-'), %p the pid,
// %% a single '%'; any other %x, and a trailing '%', are kept as they are.
func ExpandFile(pattern, host string, pid int) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c != '%' || i+1 == len(pattern) {
			b.WriteByte(c)
			continue
		}
		i++
		switch pattern[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(logHost(host))
		case 'p':
			b.WriteString(strconv.Itoa(pid))
		default:
			b.WriteByte('%')
			b.WriteByte(pattern[i])
		}
	}
	return b.String()
}

// logHost is NCCL's getHostNameForLog: the name up to the first '.', with
// '%' and '/' made '-'; "unknown" when empty (NCCL's gethostname failure).
func logHost(host string) string {
	host, _, _ = strings.Cut(host, ".")
	if host == "" {
		return "unknown"
	}
	return strings.NewReplacer("%", "-", "/", "-").Replace(host)
}

// Enabled reports whether a line of this level and subsystem would be
// written, so callers can skip building expensive arguments. It takes no
// lock.
func (l *Logger) Enabled(level param.DebugLevel, subsys param.Subsys) bool {
	return l != nil && level > param.DebugNone && l.level >= level && l.mask&subsys != 0
}

// Version writes msg alone on a line when NCCL_DEBUG is VERSION or above,
// as NCCL prints its version banner.
func (l *Logger) Version(format string, args ...any) {
	if !l.Enabled(param.DebugVersion, param.SubsysAll) {
		return
	}
	l.write(fmt.Sprintf(format, args...) + "\n")
}

// Info writes an INFO line for subsys when NCCL_DEBUG is INFO or above and
// NCCL_DEBUG_SUBSYS includes subsys.
func (l *Logger) Info(subsys param.Subsys, format string, args ...any) {
	if !l.Enabled(param.DebugInfo, subsys) {
		return
	}
	l.write(fmt.Sprintf("%s[%d] NCCL INFO %s\n", l.prefix, l.rank, fmt.Sprintf(format, args...)))
}

// Warn writes a WARN line, naming the caller's file, line and function,
// when NCCL_DEBUG is WARN or above. The message is kept for LastWarn at any
// level, as NCCL keeps it for ncclGetLastError.
func (l *Logger) Warn(format string, args ...any) {
	if l == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lastWarn = msg
	l.mu.Unlock()
	if !l.Enabled(param.DebugWarn, param.SubsysAll) {
		return
	}
	file, line, fn := caller()
	l.write(fmt.Sprintf("\n%s%s[%d] %s:%d (%s) NCCL WARN %s\n",
		l.now().Format(warnTimeFormat), l.prefix, l.rank, file, line, fn, msg))
}

// Trace writes a TRACE line for subsys when NCCL_DEBUG is TRACE and
// NCCL_DEBUG_SUBSYS includes subsys: milliseconds since the Logger was
// created and the caller's function and line. Subsystem CALL lines use
// NCCL's short "NCCL CALL" form.
func (l *Logger) Trace(subsys param.Subsys, format string, args ...any) {
	if !l.Enabled(param.DebugTrace, subsys) {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if subsys == param.SubsysCall {
		l.write(l.prefix + "NCCL CALL " + msg + "\n")
		return
	}
	_, line, fn := caller()
	ms := float64(l.now().Sub(l.start)) / float64(time.Millisecond)
	l.write(fmt.Sprintf("%s[%d] %f %s:%d NCCL TRACE %s\n", l.prefix, l.rank, ms, fn, line, msg))
}

// LastWarn returns the message of the most recent Warn call, "" if none.
func (l *Logger) LastWarn() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastWarn
}

// Close closes the NCCL_DEBUG_FILE opened by New, if any. Later lines are
// dropped. Close is idempotent.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w = io.Discard
	if l.file == nil {
		return nil
	}
	f := l.file
	l.file = nil
	return f.Close()
}

// write emits one formatted line with a single Write.
func (l *Logger) write(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, line)
}

// caller returns the file base name, line and package-qualified function
// name of the code that called the exported logging method.
func caller() (file string, line int, fn string) {
	pc, path, line, ok := runtime.Caller(2)
	if !ok {
		return "<unknown>", 0, "<unknown>"
	}
	fn = "<unknown>"
	if f := runtime.FuncForPC(pc); f != nil {
		fn = f.Name()
		if i := strings.LastIndexByte(fn, '/'); i >= 0 {
			fn = fn[i+1:]
		}
	}
	return filepath.Base(path), line, fn
}
