package localcluster

import "testing"

func TestFailedChecks(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{
			name: "two hooks still running",
			body: "[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n[+]informer-sync ok\n[-]autoregister-completion failed: reason withheld\nreadyz check failed\n",
			want: "; failing: poststarthook/rbac/bootstrap-roles, autoregister-completion",
		},
		{
			name: "no check listed",
			body: "Internal Server Error\n",
		},
		{
			name: "the last line without a newline",
			body: "[+]ping ok\n[-]etcd failed: reason withheld",
			want: "; failing: etcd",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failedChecks([]byte(tc.body)); got != tc.want {
				t.Errorf("failedChecks = %q, want %q", got, tc.want)
			}
		})
	}
}
