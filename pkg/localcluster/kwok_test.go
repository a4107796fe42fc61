package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDelayedStage(t *testing.T) {
	tests := []struct {
		name    string
		stage   string
		want    string
		wantErr bool
	}{
		{
			name:  "delay before next",
			stage: "kind: Stage\nspec:\n  selector: {}\n  next:\n    statusTemplate: x\n",
			want:  "kind: Stage\nspec:\n  selector: {}\n  delay:\n    durationMilliseconds: 1500\n  next:\n    statusTemplate: x\n",
		},
		{name: "no next", stage: "kind: Stage\nspec:\n  selector: {}\n", wantErr: true},
		{name: "two nexts", stage: "spec:\n  a:\n  next:\n  b:\n  next:\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "pod-ready.yaml")
			if err := os.WriteFile(path, []byte(tt.stage), 0o644); err != nil {
				t.Fatal(err)
			}
			c := &Cluster{Dir: dir}
			out, err := c.delayedStage(path, 1500*time.Millisecond)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "cannot find where to add a delay") {
					t.Fatalf("delayedStage error = %v, want one saying where the delay could not go", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("delayed stage:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
