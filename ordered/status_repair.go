package ordered

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
)

// The status page's repairs (StatusOptions.Repair): a POST per repair,
// from the page's own origin, doing what the Queue's method of the same
// name does.

// statusRepairTimeout bounds how long a POST waits for its repair.
const statusRepairTimeout = 30 * time.Second

// statusMaxForm bounds the body of a repair's POST.
const statusMaxForm = 4 << 10

// repairActions returns the repairs the page offers for g, a stuck group.
func repairActions(g recvcore.GroupStatus, deadLetter bool) []string {
	var as []string
	switch g.Reason {
	case "gap":
		as = append(as, recvcore.ActionSkipHole)
	case "poison":
		if deadLetter {
			as = append(as, recvcore.ActionDeadLetterHead)
		}
	case "store", "conflict":
		as = append(as, recvcore.ActionReread)
	}
	if g.Unstarted {
		as = append(as, recvcore.ActionStartAt)
	}
	return as
}

// repairResult is a POST's answer as JSON (format=json).
type repairResult struct {
	Action string `json:"action"`
	Group  string `json:"group"`
	Done   bool   `json:"done"`
	Error  string `json:"error,omitempty"`
}

// repair serves a POST: one repair.
func (h *statusHandler) repair(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	asJSON := req.URL.Query().Get("format") == "json"
	answer := func(code int, res repairResult) {
		if asJSON {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(res)
			return
		}
		if res.Done {
			// Post/Redirect/Get: the page of the group, which a reload
			// does not post again.
			w.Header().Set("Location", "?group="+url.QueryEscape(res.Group))
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		http.Error(w, res.Error, code)
	}
	if err := sameOrigin(req); err != nil {
		answer(http.StatusForbidden, repairResult{Error: "repair refused: " + err.Error()})
		return
	}
	req.Body = http.MaxBytesReader(w, req.Body, statusMaxForm)
	if err := req.ParseForm(); err != nil {
		answer(http.StatusBadRequest, repairResult{Error: "repair: bad form: " + err.Error()})
		return
	}
	res := repairResult{Action: req.PostForm.Get("repair"), Group: req.PostForm.Get("group")}
	bad := func(format string, args ...any) {
		res.Error = "repair: " + fmt.Sprintf(format, args...)
		answer(http.StatusBadRequest, res)
	}
	if v := req.PostForm.Get("group64"); v != "" {
		// The page's forms: the name base64url-encoded (see groupField).
		name, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil {
			bad("group64 is not base64url: %v", err)
			return
		}
		res.Group = string(name)
	} else if !req.PostForm.Has("group") {
		bad("no group field")
		return
	}
	if len(res.Group) > statusMaxGroupArg {
		bad("group name of %d bytes", len(res.Group))
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), statusRepairTimeout)
	defer cancel()
	q := h.q
	var err error
	switch res.Action {
	case recvcore.ActionDeadLetterHead:
		err = q.DeadLetterHead(ctx, res.Group)
	case recvcore.ActionSkipHole:
		err = q.SkipHole(ctx, res.Group)
	case recvcore.ActionReread:
		err = q.Reread(ctx, res.Group)
	case recvcore.ActionStartAt:
		epoch, eerr := strconv.ParseUint(req.PostForm.Get("epoch"), 10, 64)
		seq, serr := strconv.ParseUint(req.PostForm.Get("seq"), 10, 64)
		if eerr != nil || serr != nil || seq == 0 {
			bad("start-at needs an epoch and a seq of at least 1 (got epoch %q, seq %q)", req.PostForm.Get("epoch"), req.PostForm.Get("seq"))
			return
		}
		err = q.StartAt(ctx, res.Group, epoch, seq)
	default:
		bad("unknown repair %q: want dead-letter-head, skip-hole, reread or start-at", res.Action)
		return
	}
	if err == nil {
		res.Done = true
		answer(http.StatusOK, res)
		return
	}
	res.Error = err.Error()
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotStuck) || errors.Is(err, ErrNoDeadLetter):
		code = http.StatusConflict
	case errors.Is(err, ErrClosed):
		code = http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	answer(code, res)
}

// sameOrigin checks that a POST comes from the page's own origin, as
// net/http's CrossOriginProtection does, but refusing what carries no
// origin at all: a Sec-Fetch-Site header must say same-origin; without
// one (a browser from before 2023, curl), an Origin header must name the
// Host the request was sent to. A page cannot forge either, so a form on
// another site cannot make a browser repair. (The page's referrer policy,
// no-referrer, makes a browser send Origin: null with its forms: its
// Sec-Fetch-Site is what tells.)
func sameOrigin(req *http.Request) error {
	if site := req.Header.Get("Sec-Fetch-Site"); site != "" {
		if site != "same-origin" {
			return fmt.Errorf("cross-origin request (Sec-Fetch-Site: %.32q)", site)
		}
		return nil
	}
	origin := req.Header.Get("Origin")
	if origin == "" {
		return errors.New("neither Sec-Fetch-Site nor Origin: a repair must come from the page (or send Origin: http://HOST)")
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Host != req.Host || u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("cross-origin request (Origin %.64q, Host %.64q)", origin, req.Host)
	}
	return nil
}

// repairConfirm is the question the page asks before it posts action for
// group (shown as text by the browser's confirm dialog).
func repairConfirm(action, group string) string {
	g := displayName(group)
	switch action {
	case recvcore.ActionSkipHole:
		return "Skip the missing seqs of group " + g + "? They are recorded as skipped; a copy that arrives later is reported late and handed out Unordered (or dead-lettered)."
	case recvcore.ActionDeadLetterHead:
		return "Send the poison message of group " + g + " to the dead-letter queue, and move the group on past it?"
	case recvcore.ActionReread:
		return "Read the stored cursor of group " + g + " again now?"
	case recvcore.ActionStartAt:
		return "Start group " + g + " at this epoch and seq? The seqs below are recorded as skipped."
	}
	return action + " " + g + "?"
}
