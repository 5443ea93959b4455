//go:build !vigil_testhooks

package store

// testSignalsFromEnv returns ts: the shipped build reads no test hook
// from the environment (see testhook_on.go for the e2e build).
func testSignalsFromEnv(ts TestSignals) TestSignals { return ts }
