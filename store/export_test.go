package store

// ResetTestHoldForTest re-arms the once-per-process EnvTestHookHoldLeaderTx
// hook, so that its test also passes with -count > 1. Test builds only.
func ResetTestHoldForTest() { testHoldTaken.Store(false) }
