//go:build integration

package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// getWithToken GETs url through insecureClient with an optional bearer
// token and returns the status code and the start of the body.
func getWithToken(url, token string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	buf := make([]byte, 200)
	n, _ := resp.Body.Read(buf)
	return resp.StatusCode, fmt.Sprintf("%q", buf[:n])
}
