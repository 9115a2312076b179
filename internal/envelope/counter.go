package envelope

// Counter encodes the headers of consecutive seqs of one group and epoch
// incrementally: the header is encoded once, then only its seq digits
// change, counted up in place (a carry past the top digit widens them). It
// appends the same bytes as [Append], which formats every number of every
// header again. A signed header carries a MAC over each payload, so
// Counter takes unsigned ones only. The zero Counter is not ready: use
// [NewCounter].
type Counter struct {
	hdr        []byte // the encoded header of seq
	start, end int    // the seq digits within hdr
	seq        uint64
	arr        [64]byte // hdr's storage for short headers
}

// NewCounter returns a Counter whose first header is h's. It panics if h is
// signed or invalid, as Append does for an invalid one.
func NewCounter(h Header) *Counter {
	c := new(Counter)
	c.Reset(h)
	return c
}

// Reset makes h the next header, as NewCounter does.
func (c *Counter) Reset(h Header) {
	if h.Signed {
		panic("envelope: Counter of a signed header")
	}
	c.hdr = Append(c.arr[:0], h, nil)
	// The seq is the last number of a v1 header (#v1;epoch;seq;group#) and
	// the only one of a legacy one (#seq#).
	if h.Legacy {
		c.start = 1
	} else {
		c.start = len(prefixV1) + digits(h.Epoch) + 1
	}
	c.end = c.start + digits(h.Seq)
	c.seq = h.Seq
}

// Seq returns the seq of the next header.
func (c *Counter) Seq() uint64 { return c.seq }

// Append appends the next header and payload to dst, then counts the seq
// up. It panics past MaxNumber, as Append does.
func (c *Counter) Append(dst, payload []byte) []byte {
	if c.seq > MaxNumber {
		panic("envelope: seq beyond MaxNumber")
	}
	dst = append(dst, c.hdr...)
	dst = append(dst, payload...)
	c.seq++
	i := c.end - 1
	for ; i >= c.start && c.hdr[i] == '9'; i-- {
		c.hdr[i] = '0'
	}
	if i >= c.start {
		c.hdr[i]++
		return dst
	}
	// 9...9 became 10...0: one more digit.
	c.hdr = append(c.hdr, 0)
	copy(c.hdr[c.start+1:], c.hdr[c.start:])
	c.hdr[c.start] = '1'
	c.end++
	return dst
}
