package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llmgateway-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestProcsComesFromTheConfigUnlessTheEnvironmentSetsIt(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	parse := func(yaml string) *llmgateway.Config {
		t.Helper()
		cfg, err := llmgateway.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const base = "open: true\nupstreams: [{name: x, vendor: openai, base_url: 'http://127.0.0.1:1/v1'}]\n"
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       int
	}{
		{"unset", base, nil, 0},
		{"one", base + "procs: 1\n", nil, 1},
		{"environment wins", base + "procs: 1\n", map[string]string{"GOMAXPROCS": "2"}, 0},
	} {
		if got := procs(parse(tc.yaml), env(tc.env)); got != tc.want {
			t.Errorf("%s: procs = %d, want %d", tc.name, got, tc.want)
		}
	}
}
