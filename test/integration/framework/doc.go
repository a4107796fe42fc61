// Package framework runs the integration tests of one area, one package
// under test/integration, against the operator binary users run.
//
// Main starts a control plane for the package (pkg/localcluster), installs
// the CRD, the namespace and the RBAC of artifacts/, takes the operator
// built with the race detector (the binary BinaryEnv names, which make test
// builds once for every package, or one it builds), and starts that binary
// once more as the conversion webhook every test shares. Each
// test then creates a namespace of its own (NewNamespace) and starts an
// operator scoped to it (StartOperator), so that tests run in parallel
// without seeing each other's objects.
//
// A test sees the operator as the cluster and its users do: through the
// apiserver, whose audit log records every request the operator's
// ServiceAccount sends (Operator.Requests); through the operator's /metrics
// and its log; and through signals, where a crash is a SIGKILL.
//
// What only the controller's internals can show is a unit test in the
// repository root, with fakes.
package framework
