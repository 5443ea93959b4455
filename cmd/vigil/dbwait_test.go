package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDatabaseWaitRejectsNegative: a negative bound is a usage error
// naming the flag.
func TestDatabaseWaitRejectsNegative(t *testing.T) {
	err := validateDatabaseWait(-time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--database-wait")
	assert.NoError(t, validateDatabaseWait(0))
}
