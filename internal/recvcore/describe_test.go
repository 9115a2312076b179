package recvcore_test

import (
	"fmt"
	"strings"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// describe renders a Ready as text, one action per line, for traces and
// the scripted tests.
func describe(rd recvcore.Ready) string {
	var b strings.Builder
	for _, r := range rd.Reads {
		fmt.Fprintf(&b, "read #%d %s\n", r.ID, streams(r.Streams))
	}
	for _, c := range rd.Commits {
		fmt.Fprintf(&b, "commit #%d", c.ID)
		for _, a := range c.Advances {
			fmt.Fprintf(&b, " %s:%s->%s", a.Stream.Group, cursor(a.From), cursor(a.To))
		}
		b.WriteString("\n")
	}
	for _, p := range rd.Parks {
		fmt.Fprintf(&b, "park #%d", p.ID)
		for _, e := range p.Entries {
			fmt.Fprintf(&b, " %s/%d/%d", e.Stream.Group, e.Epoch, e.Seq)
		}
		b.WriteString("\n")
	}
	for _, u := range rd.Unparks {
		fmt.Fprintf(&b, "unpark #%d", u.ID)
		for _, q := range u.Queries {
			fmt.Fprintf(&b, " %s/%d/%d+%d", q.Stream.Group, q.Epoch, q.From, q.Max)
		}
		b.WriteString("\n")
	}
	for _, v := range rd.Visibility {
		fmt.Fprintf(&b, "visibility #%d %s %v\n", v.ID, v.Receipt, v.Timeout)
	}
	for _, d := range rd.Deletes {
		fmt.Fprintf(&b, "delete #%d %s\n", d.ID, strings.Join(d.Receipts, " "))
	}
	for _, d := range rd.DeadLetters {
		fmt.Fprintf(&b, "dead-letter #%d", d.ID)
		for _, body := range d.Bodies {
			fmt.Fprintf(&b, " %q", body)
		}
		b.WriteString("\n")
	}
	for _, r := range rd.Requeues {
		fmt.Fprintf(&b, "requeue #%d", r.ID)
		for _, body := range r.Bodies {
			fmt.Fprintf(&b, " %q", body)
		}
		b.WriteString("\n")
	}
	for _, r := range rd.Reports {
		b.WriteString(report(r))
		b.WriteString("\n")
	}
	for _, r := range rd.Resolved {
		fmt.Fprintf(&b, "resolved ticket %d", r.Ticket)
		if r.Err != nil {
			fmt.Fprintf(&b, " err=%v", r.Err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func streams(ss []seqstore.Stream) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, s.Group)
	}
	return strings.Join(parts, " ")
}

func cursor(c seqstore.Cursor) string {
	s := fmt.Sprintf("%d/%d", c.Epoch, c.Next)
	for _, r := range c.Skipped {
		s += fmt.Sprintf("[%d:%d-%d]", r.Epoch, r.First, r.Last)
	}
	return s
}

var kindNames = map[recvcore.ReportKind]string{
	recvcore.ReportGap: "gap", recvcore.ReportSkip: "skip", recvcore.ReportDuplicate: "duplicate",
	recvcore.ReportRedeliver: "redeliver", recvcore.ReportLate: "late", recvcore.ReportEpoch: "epoch",
	recvcore.ReportDeadLetter: "dead-letter", recvcore.ReportStuck: "stuck", recvcore.ReportConflict: "conflict",
	recvcore.ReportUntagged: "untagged", recvcore.ReportMismatch: "mismatch", recvcore.ReportWarn: "warn",
	recvcore.ReportRepair: "repair",
}

func report(r recvcore.Report) string {
	s := "report " + kindNames[r.Kind]
	if r.Action != "" {
		s += " " + r.Action
	}
	if r.Group != "" || r.Seq != 0 {
		s += fmt.Sprintf(" %s/%d/%d", r.Group, r.Epoch, r.Seq)
	}
	if r.Last != 0 {
		s += fmt.Sprintf("..%d", r.Last)
	}
	if r.From != 0 {
		s += fmt.Sprintf(" from=%d", r.From)
	}
	if r.ID != "" {
		s += " id=" + r.ID
	}
	if r.Err != nil {
		s += fmt.Sprintf(" err=%q", r.Err.Error())
	}
	return s
}

func delivery(d recvcore.Delivery) string {
	s := fmt.Sprintf("%s/%d/%d attempt=%d", d.Group, d.Epoch, d.Seq, d.Attempt)
	if d.Unordered {
		s += " unordered"
	}
	if d.Await != 0 {
		s += fmt.Sprintf(" await=%d", d.Await)
	}
	if d.Advance.Stream.Queue != "" {
		s += " advance=" + cursor(d.Advance.From) + "->" + cursor(d.Advance.To)
	}
	return s
}
