package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDockerfile holds the Dockerfile to the image make image builds, as
// far as reading it can: no Docker runs here to build it. Its final stage
// must start from distroless static nonroot, which provides /etc/passwd,
// /etc/group, the CA bundle, /home/nonroot as the working directory, /tmp
// and the environment, and must add the binary at the same path, run as
// the same user, with the same entrypoint and labels.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stage := finalStage(string(data))
	for _, want := range []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /out/memcached-operator " + binaryPath,
		fmt.Sprintf("USER %d:%d", nonrootUID, nonrootUID),
		fmt.Sprintf("ENTRYPOINT [%q]", binaryPath),
	} {
		if !slices.Contains(stage, want) {
			t.Errorf("The Dockerfile's final stage lacks %q:\n%s", want, strings.Join(stage, "\n"))
		}
	}
	for _, line := range stage {
		for _, instruction := range []string{"WORKDIR ", "ENV "} {
			if strings.HasPrefix(line, instruction) {
				t.Errorf("The final stage sets %q; make image copies distroless's, so the images would differ", line)
			}
		}
	}
	all := strings.Join(stage, "\n")
	for key, value := range map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.source":      source,
	} {
		if want := fmt.Sprintf("%s=%q", key, value); !strings.Contains(all, want) {
			t.Errorf("The final stage's labels lack %s", want)
		}
	}
}

// finalStage returns the instructions after the Dockerfile's last FROM,
// that FROM first, each on one line: continuations joined, comments and
// blank lines dropped.
func finalStage(dockerfile string) []string {
	var instructions []string
	current := ""
	for _, line := range strings.Split(dockerfile, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			current += cont
			continue
		}
		instructions = append(instructions, current+line)
		current = ""
	}
	for i := len(instructions) - 1; i >= 0; i-- {
		if strings.HasPrefix(instructions[i], "FROM ") {
			return instructions[i:]
		}
	}
	return nil
}
