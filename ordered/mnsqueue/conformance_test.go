package mnsqueue_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/drivertest"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// newServer starts an emulator that ends with the test.
func newServer(t testing.TB, opts *mnstest.Options) *mnstest.Server {
	t.Helper()
	srv, err := mnstest.NewServer(opts)
	require.NoError(t, err, "mnstest.NewServer")
	t.Cleanup(func() { require.NoError(t, srv.Close(), "mnstest Server.Close") })
	return srv
}

func serverCred(srv *mnstest.Server) mnsqueue.Credentials {
	return mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
}

var (
	queueSeq atomic.Int64
	runID    = fmt.Sprintf("%d-%d", time.Now().Unix()%100000, os.Getpid())
)

// uniqueName returns a queue name no other test, and no other run on the
// same account, uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("inorder-%s-%s-%d", prefix, runID, queueSeq.Add(1))
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// harness makes a fresh queue per test at endpoint and deletes it afterwards.
func harness(endpoint string, cred mnsqueue.Credentials, slow bool) drivertest.Harness {
	return drivertest.Harness{
		Slow: slow,
		New: func(t *testing.T, visibility time.Duration) driver.Queue {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := uniqueName("conf")
			require.NoError(t, mnsqueue.CreateQueue(ctx, endpoint, cred, name, &mnsqueue.QueueAttributes{Visibility: seconds(visibility)}), "CreateQueue %s", name)
			q, err := mnsqueue.New(ctx, endpoint, name, cred, nil)
			require.NoError(t, err, "mnsqueue.New")
			t.Cleanup(func() {
				q.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := mnsqueue.DeleteQueue(ctx, endpoint, cred, name); err != nil {
					t.Errorf("DeleteQueue %s: %v", name, err)
				}
			})
			return q
		},
	}
}

func TestConformance(t *testing.T) {
	srv := newServer(t, nil)
	h := harness(srv.Endpoint(), serverCred(srv), false)
	h.NewThrottled = func(t *testing.T) driver.Queue {
		// A server of its own: 2 requests a second per queue.
		slow := newServer(t, &mnstest.Options{Throttle: mnstest.Throttle{RequestRate: 2, Hold: 20 * time.Millisecond}})
		return harness(slow.Endpoint(), serverCred(slow), false).New(t, 30*time.Second)
	}
	drivertest.RunConformanceTests(t, h)
}

// TestConformanceRealMNS runs the suite against the real service when
// MNS_ENDPOINT, MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET are set. Each
// test creates its own queue and deletes it.
func TestConformanceRealMNS(t *testing.T) {
	endpoint := os.Getenv("MNS_ENDPOINT")
	cred := mnsqueue.Credentials{AccessKeyID: os.Getenv("MNS_ACCESS_KEY_ID"), AccessKeySecret: os.Getenv("MNS_ACCESS_KEY_SECRET")}
	if endpoint == "" || cred.AccessKeyID == "" || cred.AccessKeySecret == "" {
		t.Skip("needs MNS_ENDPOINT, MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET (a real MNS account)")
	}
	drivertest.RunConformanceTests(t, harness(endpoint, cred, true))
}

// fifoAsPlain is a FIFO queue seen through driver.Queue: SendBatch sends
// each body in a group of its own (a counter), so the group lock holds
// back nothing and the plain queue's contract applies.
type fifoAsPlain struct {
	*mnsqueue.Queue
	n *atomic.Int64
}

func (q fifoAsPlain) SendBatch(ctx context.Context, bodies [][]byte) error {
	groups := make([]string, len(bodies))
	for i := range groups {
		groups[i] = "c" + strconv.FormatInt(q.n.Add(1), 10)
	}
	return q.SendGroups(ctx, bodies, groups)
}

// TestConformanceFIFO runs the driver's conformance suite over a FIFO
// queue of the emulator, each message in a group of its own: receive,
// delete, visibility, batches, limits and errors behave as on a standard
// queue (the group lock itself is TestFIFODriver's).
func TestConformanceFIFO(t *testing.T) {
	srv := newServer(t, nil)
	var n atomic.Int64
	drivertest.RunConformanceTests(t, drivertest.Harness{
		New: func(t *testing.T, visibility time.Duration) driver.Queue {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := uniqueName("conf-fifo")
			require.NoError(t, mnsqueue.CreateQueue(ctx, srv.Endpoint(), serverCred(srv), name,
				&mnsqueue.QueueAttributes{Visibility: seconds(visibility), QueueType: mnsqueue.QueueTypeFIFO}))
			q, err := mnsqueue.New(ctx, srv.Endpoint(), name, serverCred(srv), &mnsqueue.Options{QueueType: mnsqueue.QueueTypeFIFO})
			require.NoError(t, err)
			t.Cleanup(func() { q.Close() })
			return fifoAsPlain{Queue: q, n: &n}
		},
	})
}
