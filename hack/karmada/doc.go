// Package karmada tests the Karmada ResourceInterpreterCustomization of
// artifacts/karmada with Karmada's own Lua interpreter. It has no code
// besides the test.
package karmada
