package storetest

import "github.com/vigil-sched/vigil/store"

// Migrate defaults to the real schema migration. Because of this import,
// tests inside package store itself cannot use storetest (import cycle);
// they belong in package store_test.
func init() { Migrate = store.Migrate }
