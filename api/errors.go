package api

import (
	"strings"

	"github.com/vigil-sched/vigil/store"
)

// storeMessage is the message of a store error wrapping sentinel, without
// the sentinel's own text, which the error code already carries: "cancel
// run 1: it is already success: conflict" is sent as "cancel run 1: it is
// already success", and "run 7: not found" as "run 7 not found".
func storeMessage(err, sentinel error) string {
	msg, suffix := err.Error(), ": "+sentinel.Error()
	trimmed, ok := strings.CutSuffix(msg, suffix)
	if !ok || trimmed == "" {
		return msg
	}
	if !strings.Contains(trimmed, ": ") || strings.HasSuffix(msg, ": "+store.ErrNotFound.Error()) {
		// Nothing but the subject is left: keep the verdict in words.
		return trimmed + " " + sentinel.Error()
	}
	return trimmed
}
