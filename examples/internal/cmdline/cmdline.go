// Package cmdline is what the example programs share on their command line:
// a usage message that lists the environment variables a program reads
// beside its flags, exit statuses (-h is a success, not an error), and hints
// for the failures a first run meets, such as no emulator listening at the
// default endpoint.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// DefaultEndpoint is where examples/mns-emulator listens by default.
const DefaultEndpoint = "http://127.0.0.1:8931/."

// EmulatorCommand starts examples/mns-emulator on its default address, as
// the README says.
const EmulatorCommand = "go run ./examples/mns-emulator"

// Env is an environment variable a program reads.
type Env struct {
	Name string
	Help string
}

// The MNS environment variables of the examples that talk to MNS.
var (
	EnvEndpoint = Env{"MNS_ENDPOINT", "MNS endpoint, e.g. http://ACCOUNT.mns.REGION.aliyuncs.com"}
	EnvKeyID    = Env{"MNS_ACCESS_KEY_ID", "access key id for MNS_ENDPOINT"}
	EnvSecret   = Env{"MNS_ACCESS_KEY_SECRET", "its secret (environment only: a flag would show in ps)"}
)

// SetUsage makes fs print, for -h and flag errors, synopsis, the flags and
// their defaults, and the environment variables in envs.
func SetUsage(fs *flag.FlagSet, synopsis string, envs ...Env) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
		if synopsis != "" {
			fmt.Fprintf(w, "%s\n\nFlags:\n", strings.TrimRight(synopsis, "\n"))
		}
		fs.PrintDefaults()
		if len(envs) > 0 {
			fmt.Fprintln(w, "\nEnvironment:")
			width := 0
			for _, e := range envs {
				width = max(width, len(e.Name))
			}
			for _, e := range envs {
				fmt.Fprintf(w, "  %-*s  %s\n", width, e.Name, e.Help)
			}
		}
	}
}

// UsageError is a command line that fs.Parse refused; the flag package
// has printed it with the usage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Parse parses args with fs, which must use flag.ContinueOnError. It
// returns flag.ErrHelp for -h and -help, a *UsageError for other flag
// errors, and an error for arguments left over.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{err}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see -h)", fs.Args())
	}
	return nil
}

// Hinted is an error with advice for the user, which Status prints on a
// line of its own after the error.
type Hinted struct {
	Err  error
	Hint string
}

func (e *Hinted) Error() string { return e.Err.Error() }
func (e *Hinted) Unwrap() error { return e.Err }

// Status prints err, as "name: err" and its hint, to stderr, and returns the
// exit status: 0 for nil and flag.ErrHelp (-h asked for the usage, which is
// printed), 2 for a *UsageError (already printed), 1 otherwise.
func Status(name string, err error, stderr io.Writer) int {
	var usage *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var h *Hinted
	if errors.As(err, &h) {
		fmt.Fprintf(stderr, "%s: %s\n", name, h.Hint)
	}
	return 1
}

// Refused reports whether err says that nothing accepted the connection.
// The MNS SDK flattens network errors into its own, so the text is
// looked at too.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "connection refused") || strings.Contains(s, "actively refused")
}

// Unreachable returns err with a hint when it says that nothing listens at
// endpoint: on the emulator's default endpoint, the command that starts it;
// on another loopback port, the same with -addr; elsewhere, which variable
// names the endpoint. Other errors are returned as they are.
func Unreachable(err error, endpoint string) error {
	if !Refused(err) {
		return err
	}
	host := endpointHost(endpoint)
	var hint string
	switch {
	case endpoint == DefaultEndpoint:
		hint = fmt.Sprintf("nothing listens at %s: start the MNS emulator in another terminal with `%s`, "+
			"or set MNS_ENDPOINT, MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET for real MNS", host, EmulatorCommand)
	case IsLoopback(endpoint):
		_, port, _ := net.SplitHostPort(host)
		hint = fmt.Sprintf("nothing listens at %s: start the MNS emulator there with `%s -addr 127.0.0.1:%s`, or check -endpoint (MNS_ENDPOINT)",
			host, EmulatorCommand, port)
	default:
		hint = fmt.Sprintf("nothing accepts connections at %s: check -endpoint (MNS_ENDPOINT)", host)
	}
	return &Hinted{Err: err, Hint: hint}
}

// IsLoopback reports whether endpoint's host is a loopback address or
// localhost: where the emulator runs, whose published key works.
func IsLoopback(endpoint string) bool {
	h, _, err := net.SplitHostPort(endpointHost(endpoint))
	if err != nil {
		h = endpointHost(endpoint)
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// endpointHost is endpoint's host:port, or endpoint itself when it does
// not parse.
func endpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return endpoint
	}
	return u.Host
}

// Loggers returns, with verbose, loggers at level on w: one for package
// ordered, one for the driver and the store. Without verbose both are nil,
// which they take for "discard".
//
// Package ordered logs its Options.Name under the key queue: the name of
// the streams in the store ("default" unless set), not the MNS queue's. Its
// logger here says streams= for that, and names the MNS queue in every line
// as mns_queue=; the MNS driver already logs queue=<the MNS queue>.
func Loggers(verbose bool, w io.Writer, level slog.Level, mnsQueue string) (ordered, other *slog.Logger) {
	if !verbose {
		return nil, nil
	}
	other = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	ordered = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == "queue" {
				a.Key = "streams"
			}
			return a
		}})).With("mns_queue", mnsQueue)
	return ordered, other
}
