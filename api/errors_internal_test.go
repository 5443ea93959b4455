package api

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/store"
)

func TestStoreMessage(t *testing.T) {
	t.Parallel()
	conflict := fmt.Errorf("cancel run 1: %w", fmt.Errorf("it is already success: %w", store.ErrConflict))
	assert.Equal(t, "cancel run 1: it is already success", storeMessage(conflict, store.ErrConflict))
	assert.Equal(t, "run 7 not found", storeMessage(fmt.Errorf("run 7: %w", store.ErrNotFound), store.ErrNotFound))
	assert.Equal(t, "not found", storeMessage(store.ErrNotFound, store.ErrNotFound))
	assert.Equal(t, "agent 3 forbidden", storeMessage(fmt.Errorf("agent 3: %w", store.ErrForbidden), store.ErrForbidden))
}
