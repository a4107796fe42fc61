package conversion

import (
	"errors"
	"io"
	"sync"
)

// Review bodies are charged to a budget of bytes held at once, rather than
// counted as requests: one 60 MiB body costs what 60,000 small ones do, and
// a body that trickles in holds only what has arrived.
const (
	// maxReviewBytes bounds one ConversionReview. The apiserver converts a
	// list in one review, so this is far above one object's size; at about
	// 2 KiB a Memcached it is some 8,000 objects in one unpaginated
	// v1alpha1 list. kubectl pages lists by 500.
	maxReviewBytes = 16 << 20
	// inFlightBytes bounds what all reviews in flight hold at once: the
	// bodies read and not yet converted, and the converted objects not yet
	// written. Two full-size reviews fit.
	inFlightBytes = 2 * maxReviewBytes
)

var (
	// errReviewTooLarge is a body over maxReviewBytes: 413, since sending
	// it again cannot succeed.
	errReviewTooLarge = errors.New("the ConversionReview is larger than the webhook accepts")
	// errWebhookBusy is a body that does not fit in what the other reviews
	// in flight leave: 503, since it may succeed in a moment.
	errWebhookBusy = errors.New("the webhook holds as many review bytes as it may; retry")
)

// budget is a count of bytes that may still be taken. Taking never waits:
// a reader that waited for bytes held by other readers, which wait in turn,
// could wait forever, and the apiserver's review would time out anyway.
type budget struct {
	mu   sync.Mutex
	free int64
}

func newBudget(n int64) *budget { return &budget{free: n} }

// take takes n bytes, or nothing and false if fewer are free.
func (b *budget) take(n int64) bool { return b.exchange(0, n) }

// fits reports whether n bytes are free now.
func (b *budget) fits(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return n <= b.free
}

// exchange gives back in bytes and takes out instead, in one step, or
// changes nothing and returns false if the difference is not free.
func (b *budget) exchange(in, out int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if out-in > b.free {
		return false
	}
	b.free += in - out
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
}

// chargedReader charges every byte read from r to a budget, and fails once
// the body is over its limit or the budget has no more. A review swaps the
// charge of each object it has converted for that of the result (swap), so
// that what it holds stays charged and what it has let go does not.
// release gives everything back; call it once the request is answered.
type chargedReader struct {
	r      io.Reader
	budget *budget
	limit  int64
	// read is the bytes of the body read so far, held those charged now.
	read, held int64
}

func (c *chargedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n == 0 {
		return 0, err
	}
	switch {
	case c.read+int64(n) > c.limit:
		return 0, errReviewTooLarge
	case !c.budget.take(int64(n)):
		return 0, errWebhookBusy
	}
	c.read += int64(n)
	c.held += int64(n)
	return n, err
}

// swap gives back the charge of in bytes read and no longer held, and
// charges out bytes held instead.
func (c *chargedReader) swap(in, out int64) error {
	in = min(in, c.held)
	if !c.budget.exchange(in, out) {
		return errWebhookBusy
	}
	c.held += out - in
	return nil
}

func (c *chargedReader) release() {
	c.budget.give(c.held)
	c.held = 0
}
