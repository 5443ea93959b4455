// Package layers has no code: its test holds the import rules between
// Vigil's packages (docs/design.md, the package map), so a wire type or
// a policy that leaks into a lower layer fails a test instead of a review.
package layers
