// Package signals turns SIGINT and SIGTERM into context cancellation, so
// that the operator shuts down through the same path whether it is stopped
// by a user, by the kubelet or by a test.
package signals
