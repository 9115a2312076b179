package mnsqueue_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue"
)

// Review 2 (security), kept as a regression: the driver speaks https
// through its own fasthttp client, and a server whose certificate nobody
// trusts is refused before any request reaches it.
func TestSec3TLSVerified(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(500)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := mnsqueue.New(ctx, srv.URL+"/.", "q", mnsqueue.Credentials{AccessKeyID: "id", AccessKeySecret: "secret"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate", "refused for its certificate")
	assert.Zero(t, hits.Load(), "a request was sent to a server whose certificate is not trusted")
}
