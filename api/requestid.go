package api

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// requestIDKey is the context key of a request's id.
type requestIDKey struct{}

// requestIDPrefix tells this process's request ids from another
// replica's; requestSeq numbers the requests within it.
var (
	requestIDPrefix = func() string {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
	requestSeq atomic.Uint64
)

// newRequestID returns an id unique across replicas and restarts (a random
// prefix per process, then a counter), cheap enough for every request.
func newRequestID() string {
	return requestIDPrefix + "-" + strconv.FormatUint(requestSeq.Add(1), 36)
}
