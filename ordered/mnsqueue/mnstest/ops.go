package mnstest

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

func (c *call) createQueue() *apiError {
	var qb queueBody
	// An attribute the body leaves out takes its default; one it gives is
	// checked as given (VisibilityTimeout 0 is refused, not defaulted).
	a := QueueAttributes{}.withDefaults()
	if len(strings.TrimSpace(string(c.body))) > 0 {
		if err := decode(c.body, &qb, &qb.XMLName, "Queue"); err != nil {
			return err
		}
		if err := qb.apply(&a); err != nil {
			return err
		}
	}
	created, err := c.s.createQueue(c.qname, a)
	if err != nil {
		return err
	}
	if created {
		c.w.Header().Set("Location", "http://"+c.r.Host+"/queues/"+c.qname)
		c.status = http.StatusCreated
	} else {
		c.status = http.StatusNoContent
	}
	return nil
}

func (c *call) setQueueAttributes() *apiError {
	var qb queueBody
	if err := decode(c.body, &qb, &qb.XMLName, "Queue"); err != nil {
		return err
	}
	q := c.s.queue(c.qname)
	if q == nil {
		return errQueueNotExist
	}
	if p := qb.DlqPolicy; p != nil {
		// Checked before q.mu is taken: the server lock comes first.
		c.s.mu.RLock()
		err := c.s.checkDeadLetterQueue(c.qname, strings.TrimSpace(p.DeadLetterTargetQueue), q.fifo)
		c.s.mu.RUnlock()
		if err != nil {
			return err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return errQueueNotExist
	}
	a := q.attrs
	if err := qb.apply(&a); err != nil {
		return err
	}
	if err := a.check(); err != nil {
		return err
	}
	if a.QueueType != q.attrs.QueueType {
		return invalidArgument("The QueueType of a queue cannot be changed.")
	}
	q.attrs = a
	q.modified = c.s.now()
	c.status = http.StatusNoContent
	// A shorter polling wait or delay matters to waiting polls only at
	// their next look; wake them so they take it into account.
	q.wake()
	return nil
}

func (c *call) getQueueAttributes() *apiError {
	info, err := c.s.Queue(c.qname)
	if err != nil {
		return errQueueNotExist
	}
	c.out = append(c.out, xmlHeader...)
	c.out = appendQueueAttrs(c.out, &info, true, "")
	c.status = http.StatusOK
	return nil
}

// listing is the paging of a list request (ListQueue, ListTopic,
// ListSubscriptionByTopic): names in order from x-mns-marker (inclusive),
// at most x-mns-ret-number (1..1000, default 1000), filtered by
// x-mns-prefix, with attributes when x-mns-with-meta is true.
type listing struct {
	marker, prefix string
	limit          int
	withMeta       bool
}

func (c *call) listing() (listing, *apiError) {
	h := c.r.Header
	l := listing{
		marker:   h.Get("X-Mns-Marker"),
		prefix:   h.Get("X-Mns-Prefix"),
		withMeta: strings.EqualFold(h.Get("X-Mns-With-Meta"), "true"),
		limit:    1000,
	}
	if v := h.Get("X-Mns-Ret-Number"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return l, rangeError("x-mns-ret-number", 1, 1000, "")
		}
		l.limit = n
	}
	return l, nil
}

// page returns the indexes of sorted names on this page, and the marker of
// the next page ("" on the last: the answer then has no NextMarker, which
// some SDKs cannot parse empty).
func (l listing) page(names []string) (idx []int, next string) {
	i := sort.SearchStrings(names, l.marker)
	for ; i < len(names); i++ {
		if !strings.HasPrefix(names[i], l.prefix) {
			continue
		}
		if len(idx) == l.limit {
			return idx, names[i]
		}
		idx = append(idx, i)
	}
	return idx, ""
}

// listQueues answers ListQueue.
func (c *call) listQueues() *apiError {
	l, err := c.listing()
	if err != nil {
		return err
	}
	infos := c.s.Queues()
	names := make([]string, len(infos))
	for i := range infos {
		names[i] = infos[i].Name
	}
	idx, next := l.page(names)
	c.writeList("Queues", idx, next, func(b []byte, i int) []byte {
		url := "http://" + c.r.Host + "/queues/" + infos[i].Name
		if l.withMeta {
			return appendQueueAttrs(b, &infos[i], false, url)
		}
		return appendURLItem(b, "Queue", "QueueURL", url)
	})
	return nil
}

// writeList answers a list request: the root element, one item per index,
// written by item, and NextMarker when more remain.
func (c *call) writeList(root string, idx []int, next string, item func(b []byte, i int) []byte) {
	b := append(c.out, xmlHeader...)
	b = append(b, "<"+root+xmlNS+">"...)
	for _, i := range idx {
		b = item(b, i)
	}
	if next != "" {
		b = appendElem(b, "NextMarker", next)
	}
	c.out = append(b, "</"+root+">"...)
	c.status = http.StatusOK
}

// appendURLItem appends <item><urlElem>url</urlElem></item>, a list entry
// without attributes.
func appendURLItem(b []byte, item, urlElem, url string) []byte {
	b = append(b, "<"+item+">"...)
	b = appendElem(b, urlElem, url)
	return append(b, "</"+item+">"...)
}

// decodeSend decodes a send body whose root must be root, by the fast path
// when the body has the SDK's shape.
func decodeSend(body []byte, sb *sendBody, root string) *apiError {
	if fastSendBody(body, sb) {
		if sb.XMLName.Local != root {
			return errMalformedXML
		}
		return nil
	}
	*sb = sendBody{}
	return decode(body, sb, &sb.XMLName, root)
}

// entry is one message to send, validated.
type entry struct {
	body, md5 string
	delay     int64 // -1: the queue's
	priority  int
	group     string // MessageGroupId: required by a FIFO queue, ignored by a standard one
	id        string
	handle    string
	err       *apiError
}

// checkEntry validates one message against the queue's limits; a FIFO
// queue's message must carry a MessageGroupId.
func checkEntry(se *sendEntry, maxSize int, fifo bool) entry {
	e := checkBody(se.MessageBody, se.DelaySeconds, se.Priority, maxSize)
	if e.err == nil && fifo {
		if se.MessageGroupID == nil || strings.TrimSpace(*se.MessageGroupID) == "" {
			return entry{err: errMissingGroup}
		}
		e.group = *se.MessageGroupID
	}
	return e
}

// checkBody validates a message's body, delay and priority.
func checkBody(body *string, delayText, prioText string, maxSize int) entry {
	if body == nil {
		return entry{err: invalidArgument("MessageBody is required.")}
	}
	if len(*body) > maxSize {
		return entry{err: rangeError("MessageBody", 1, int64(maxSize), "bytes")}
	}
	delay, err := parseOptInt(delayText, "DelaySeconds")
	if err != nil {
		return entry{err: err}
	}
	if delay > maxDelaySeconds || delay < -1 {
		return entry{err: rangeError("DelaySeconds", 0, maxDelaySeconds, "seconds")}
	}
	if delay == 0 {
		// The SDK always sends <DelaySeconds>0</DelaySeconds>; taking it
		// as "not set" lets the queue's DelaySeconds apply.
		delay = -1
	}
	prio, err := parseOptInt(prioText, "Priority")
	if err != nil {
		return entry{err: err}
	}
	if prio <= 0 {
		if prio < -1 {
			return entry{err: rangeError("Priority", 1, maxPriority, "")}
		}
		prio = defaultPriority // absent, or 0 as the SDK sends by default
	}
	if prio > maxPriority {
		return entry{err: rangeError("Priority", 1, maxPriority, "")}
	}
	return entry{body: *body, md5: md5Hex(*body), delay: delay, priority: int(prio)}
}

// store sends e to q, within the server's caps (Options.MaxMessages,
// MaxMessageBytes): a send beyond them fails e with MessageNumExceededLimit.
// The LoseAckedSends fault may throw e away. The caller holds q.mu.
func (c *call) store(q *queue, e *entry, now int64) {
	lost := c.faults.LoseAckedSends > 0 && q.rng.Float64() < c.faults.LoseAckedSends
	if !lost && !c.s.reserve(1, int64(len(e.body)), false) {
		e.err = errMessageLimit
		return
	}
	delay := e.delay // seconds, or -1
	if delay > 0 {
		delay *= second
	}
	e.id, e.handle = q.send(e.body, e.md5, delay, e.priority, e.group, now, lost)
}

// messageQueue returns the request's queue, locked, with its timers
// advanced. The first call of a request charges it cost against the queue's
// request rate and, for a receive, checks the consumption throttle
// (Options.Throttle); a refusal leaves the queue unlocked.
func (c *call) messageQueue(cost int) (*queue, int64, *apiError) {
	q := c.s.queue(c.qname)
	if q == nil {
		return nil, 0, errQueueNotExist
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, 0, errQueueNotExist
	}
	now := c.s.now()
	q.advance(now)
	if !c.admitted {
		c.admitted = true
		receive := c.op == opReceiveMessage || c.op == opBatchReceiveMessage
		if err := q.admit(now, &c.s.opts.Throttle, cost, receive); err != nil {
			q.mu.Unlock()
			return nil, 0, err
		}
	}
	return q, now, nil
}

func (c *call) sendMessage() *apiError {
	var sb sendBody
	if err := decodeSend(c.body, &sb, "Message"); err != nil {
		return err
	}
	q, now, err := c.messageQueue(1)
	if err != nil {
		return err
	}
	e := checkEntry(&sb.sendEntry, q.attrs.MaximumMessageSize, q.fifo)
	if e.err != nil {
		q.mu.Unlock()
		return e.err
	}
	c.store(q, &e, now)
	q.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	b := append(c.out, xmlHeader...)
	b = append(b, "<Message"+xmlNS+">"...)
	b = appendElem(b, "MessageId", e.id)
	b = appendElem(b, "MessageBodyMD5", e.md5)
	if e.handle != "" {
		b = appendElem(b, "ReceiptHandle", e.handle)
	}
	c.out = append(b, "</Message>"...)
	c.status = http.StatusCreated
	return nil
}

func (c *call) batchSendMessage() *apiError {
	var sb sendBody
	if err := decodeSend(c.body, &sb, "Messages"); err != nil {
		return err
	}
	n := len(sb.Messages)
	if n < 1 || n > maxBatch {
		return invalidArgument("The count of message in batch request should between 1 and 16.")
	}
	total := 0
	for _, m := range sb.Messages {
		if m.MessageBody != nil {
			total += len(*m.MessageBody)
		}
	}
	if total > maxBatchBytes {
		return rangeError("total size of MessageBody in batch request", 1, maxBatchBytes, "bytes")
	}
	q, now, err := c.messageQueue(n)
	if err != nil {
		return err
	}
	entries := make([]entry, n)
	failed := 0
	for i := range sb.Messages {
		entries[i] = checkEntry(&sb.Messages[i], q.attrs.MaximumMessageSize, q.fifo)
	}
	if c.fault == faultPartial {
		// Fail a random, non-empty subset with InternalError.
		first := int(c.s.drawN(int64(n)))
		for i := range entries {
			if entries[i].err == nil && (i == first || c.s.draw(0.5)) {
				entries[i].err = errInternal
			}
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.err != nil {
			failed++
			continue
		}
		if c.store(q, e, now); e.err != nil {
			failed++
		}
	}
	q.mu.Unlock()
	b := append(c.out, xmlHeader...)
	b = append(b, "<Messages"+xmlNS+">"...)
	for i := range entries {
		e := &entries[i]
		b = append(b, "<Message>"...)
		if e.err != nil {
			b = appendElem(b, "ErrorCode", e.err.code)
			b = appendElem(b, "ErrorMessage", e.err.message)
		} else {
			b = appendElem(b, "MessageId", e.id)
			b = appendElem(b, "MessageBodyMD5", e.md5)
		}
		b = append(b, "</Message>"...)
	}
	c.out = append(b, "</Messages>"...)
	c.status = http.StatusCreated
	if failed > 0 {
		c.status = http.StatusInternalServerError
		c.code = "partial"
	}
	return nil
}

// countParam reads numOfMessages (1..16) for batch operations, or 1.
func (c *call) countParam() (int, *apiError) {
	if c.op != opBatchReceiveMessage && c.op != opBatchPeekMessage {
		return 1, nil
	}
	n, err := strconv.Atoi(c.param("numOfMessages"))
	if err != nil || n < 1 || n > maxBatch {
		return 0, rangeError("numOfMessages", 1, maxBatch, "")
	}
	return n, nil
}

func (c *call) receiveMessage() *apiError {
	n, err := c.countParam()
	if err != nil {
		return err
	}
	wait := int64(-1)
	if c.has("waitseconds") {
		w, perr := strconv.ParseInt(c.param("waitseconds"), 10, 64)
		if perr != nil || w < 0 || w > maxPollingWaitSeconds {
			return rangeError("waitseconds", 0, maxPollingWaitSeconds, "seconds")
		}
		wait = w
	}
	out := make([]delivery, 0, n)
	var dead []*message
	deadline := int64(0)
	waiting := false
	for {
		q, now, err := c.messageQueue(n)
		if err != nil {
			if waiting {
				return errMessageNotExist // the queue went away during the wait
			}
			return err
		}
		if waiting {
			q.waiters--
		}
		if deadline == 0 {
			if wait < 0 {
				wait = int64(q.attrs.PollingWaitSeconds)
			}
			deadline = now + wait*second
		}
		out, dead = q.receive(n, now, c.faults.Redeliver, out[:0], dead[:0])
		done := len(out) > 0 || now >= deadline
		if len(dead) > 0 {
			// Moved with q unlocked: the dead-letter queue has its own lock.
			dlq := q.attrs.DeadLetterQueue
			q.mu.Unlock()
			c.s.deadLetter(dlq, dead, now)
			if done {
				break
			}
			waiting = false
			continue // look again: q may have changed meanwhile
		}
		if done {
			q.mu.Unlock()
			break
		}
		sleep := deadline - now
		if due := q.nextDue(); due > 0 && due-now < sleep {
			sleep = max(due-now, int64(time.Millisecond))
		}
		ch := q.waitCh
		q.waiters++
		waiting = true
		q.mu.Unlock()
		if !c.wait(ch, time.Duration(sleep)) {
			q.mu.Lock()
			q.waiters--
			q.mu.Unlock()
			return errMessageNotExist
		}
	}
	if len(out) == 0 {
		return errMessageNotExist
	}
	c.writeDeliveries(out)
	return nil
}

// wait sleeps until woken, d passes, or the server or the request ends
// (false).
func (c *call) wait(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return true
	case <-c.s.done:
		return false
	case <-c.r.Context().Done():
		return false
	}
}

func (c *call) peekMessage() *apiError {
	n, err := c.countParam()
	if err != nil {
		return err
	}
	q, now, err := c.messageQueue(n)
	if err != nil {
		return err
	}
	if q.fifo {
		q.mu.Unlock()
		return errFifoPeek
	}
	out := q.peek(n, now, nil)
	q.mu.Unlock()
	if len(out) == 0 {
		return errMessageNotExist
	}
	c.writeDeliveries(out)
	return nil
}

func (c *call) writeDeliveries(out []delivery) {
	b := append(c.out, xmlHeader...)
	if c.op == opBatchReceiveMessage || c.op == opBatchPeekMessage {
		b = append(b, "<Messages"+xmlNS+">"...)
		for i := range out {
			b = appendMessage(b, &out[i], false)
		}
		b = append(b, "</Messages>"...)
	} else {
		b = appendMessage(b, &out[0], true)
	}
	c.out = b
	c.status = http.StatusOK
}

func (c *call) deleteMessage() *apiError {
	handle := c.handleParam()
	if handle == "" {
		return errMissingHandle
	}
	q, _, err := c.messageQueue(1)
	if err != nil {
		return err
	}
	err = q.remove(handle)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	c.status = http.StatusNoContent
	return nil
}

func (c *call) batchDeleteMessage() *apiError {
	var hb handlesBody
	if !fastHandlesBody(c.body, &hb) {
		hb = handlesBody{}
		if err := decode(c.body, &hb, &hb.XMLName, "ReceiptHandles"); err != nil {
			return err
		}
	}
	n := len(hb.Handles)
	if n < 1 || n > maxBatch {
		return invalidArgument("The count of receipt handle in batch request should between 1 and 16.")
	}
	errs := make([]*apiError, n)
	if c.fault == faultPartial {
		first := int(c.s.drawN(int64(n)))
		for i := range errs {
			if i == first || c.s.draw(0.5) {
				errs[i] = errInternal
			}
		}
	}
	q, _, err := c.messageQueue(n)
	if err != nil {
		return err
	}
	failed := 0
	for i, h := range hb.Handles {
		if errs[i] == nil {
			errs[i] = q.remove(strings.TrimSpace(h))
		}
		if errs[i] != nil {
			failed++
		}
	}
	q.mu.Unlock()
	if failed == 0 {
		c.status = http.StatusNoContent
		return nil
	}
	b := append(c.out, xmlHeader...)
	b = append(b, "<Errors"+xmlNS+">"...)
	for i, e := range errs {
		if e == nil {
			continue
		}
		b = append(b, "<Error>"...)
		b = appendElem(b, "ErrorCode", e.code)
		b = appendElem(b, "ErrorMessage", e.message)
		b = appendElem(b, "ReceiptHandle", hb.Handles[i])
		b = append(b, "</Error>"...)
	}
	c.out = append(b, "</Errors>"...)
	c.status = http.StatusNotFound
	c.code = "partial"
	return nil
}

func (c *call) changeVisibility() *apiError {
	handle := c.handleParam()
	if handle == "" {
		return errMissingHandle
	}
	vtText := c.param("VisibilityTimeout")
	if vtText == "" {
		return errMissingVisTime
	}
	vt, perr := strconv.ParseInt(vtText, 10, 64)
	if perr != nil || vt < 1 || vt > maxVisibilitySeconds {
		return rangeError("VisibilityTimeout", 1, maxVisibilitySeconds, "seconds")
	}
	q, now, err := c.messageQueue(1)
	if err != nil {
		return err
	}
	nh, visible, err := q.changeVisibility(handle, vt, now)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	b := append(c.out, xmlHeader...)
	b = append(b, "<ChangeVisibility"+xmlNS+">"...)
	b = appendElem(b, "ReceiptHandle", nh)
	b = appendIntElem(b, "NextVisibleTime", ms(visible))
	c.out = append(b, "</ChangeVisibility>"...)
	c.status = http.StatusOK
	return nil
}
