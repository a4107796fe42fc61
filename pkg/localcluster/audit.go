package localcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditPolicy writes the policy that logs, at Metadata level, every request
// of the given groups' members, once each request is answered (and, for a
// watch, also once it has started). Nothing else is logged: the control
// plane's own requests would bury the few a test counts.
func auditPolicy(dir string, groups []string) (string, error) {
	quoted := make([]string, len(groups))
	for i, g := range groups {
		b, err := json.Marshal(g)
		if err != nil {
			return "", err
		}
		quoted[i] = string(b)
	}
	policy := fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: [%s]
- level: None
`, strings.Join(quoted, ", "))
	path := filepath.Join(dir, "audit-policy.yaml")
	return path, os.WriteFile(path, []byte(policy), 0o600)
}

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests read.
type AuditEvent struct {
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"responseStatus"`
	Annotations              map[string]string `json:"annotations"`
	RequestReceivedTimestamp metav1.MicroTime  `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime  `json:"stageTimestamp"`
}

// Namespace is the namespace of the object the request was for, empty for
// a cluster-scoped one.
func (e AuditEvent) Namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

// Name is the name of the object the request was for, empty for a list or
// a create without a name.
func (e AuditEvent) Name() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Name
}

// Resource is the resource the request was for, with its subresource after
// a slash ("memcacheds/status").
func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// Code is the HTTP status of the answer, 0 when none is recorded.
func (e AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// Write reports a request that changes state.
func (e AuditEvent) Write() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// RBACDenied reports a request the authorizer refused, as opposed to one
// admission refused with a 403 (a write into a terminating namespace).
func (e AuditEvent) RBACDenied() bool {
	return e.Annotations["authorization.k8s.io/decision"] == "forbid"
}

func (e AuditEvent) String() string {
	name := e.Resource()
	if e.Name() != "" {
		name += " " + e.Namespace() + "/" + e.Name()
	}
	return fmt.Sprintf("%s %s (%d)", e.Verb, name, e.Code())
}

// AuditLog reads the audit log of a cluster started with AuditGroups as it
// grows: each Events call parses only the lines written since the last.
type AuditLog struct {
	path string

	mu     sync.Mutex
	offset int64
	events []AuditEvent
}

// AuditLog returns a reader of the cluster's audit log; nil when the
// cluster was started without AuditGroups.
func (c *Cluster) AuditLog() *AuditLog {
	if c.auditLog == "" {
		return nil
	}
	return &AuditLog{path: c.auditLog}
}

// Events returns every event logged so far that matches, in the order the
// apiserver wrote them. An event is written once its request is answered,
// so a request whose answer the caller has seen may still be missing: a
// caller counts requests once their effect is visible.
func (l *AuditLog) Events(match func(AuditEvent) bool) ([]AuditEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.readNew(); err != nil {
		return nil, err
	}
	var out []AuditEvent
	for _, e := range l.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// readNew parses the complete lines written since the last read; a line the
// apiserver is still writing is read next time.
func (l *AuditLog) readNew() error {
	f, err := os.Open(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		l.offset += int64(len(line))
		var e AuditEvent
		if err := json.Unmarshal(bytes.TrimSpace(line), &e); err != nil {
			return fmt.Errorf("parsing audit log %s: %w", l.path, err)
		}
		l.events = append(l.events, e)
	}
}
