package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// startupWait bounds how long waitHTTP waits for a process to answer. A
// kube-apiserver restarted while the package's neighbours load both cores
// took more than a minute to pass its post-start hooks.
const startupWait = 3 * time.Minute

// waitHTTP polls url until it answers 200, the process exits, or
// startupWait passes.
func waitHTTP(ctx context.Context, p *process, url string, tlsCfg *tls.Config) error {
	// A starved apiserver takes seconds to answer /readyz; a request given
	// up on is only an error in its log.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startupWait, true, func(ctx context.Context) (bool, error) {
		if exited, exitErr := p.exited(); exited {
			return false, fmt.Errorf("%w: %v", errExited, exitErr)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s answered %s%s", url, resp.Status, failedChecks(body))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil && !errors.Is(err, errExited) {
			err = fmt.Errorf("%w (last: %v)", err, last)
		}
		return p.failure(err)
	}
	return nil
}

// failedChecks lists the checks a health endpoint of the apiserver
// reports failing: on failure its body has a "[-]name failed: ..." line
// for each, which say what it still waits for.
func failedChecks(body []byte) string {
	var failed []string
	for line := range strings.Lines(string(body)) {
		if name, ok := strings.CutPrefix(line, "[-]"); ok {
			name, _, _ = strings.Cut(name, " ")
			failed = append(failed, name)
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return "; failing: " + strings.Join(failed, ", ")
}
