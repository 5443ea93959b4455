package main

import (
	"testing"

	"github.com/vigil-sched/vigil/store/storetest"
)

// TestMain runs the package's tests with store/storetest's throwaway
// PostgreSQL, for the commands that talk to the database directly
// (vigil fence).
func TestMain(m *testing.M) { storetest.Main(m) }
