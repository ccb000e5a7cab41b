package providertest_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

// recordingTB is a testing.TB that records failures; Fatal ends the goroutine, like the
// real one.
type recordingTB struct {
	testing.TB // nil: only the methods below may be called
	failed     bool
}

func (r *recordingTB) Helper()                  {}
func (r *recordingTB) Error(...any)             { r.failed = true }
func (r *recordingTB) Errorf(string, ...any)    { r.failed = true }
func (r *recordingTB) Fatal(...any)             { r.failed = true; runtime.Goexit() }
func (r *recordingTB) Fatalf(string, ...any)    { r.failed = true; runtime.Goexit() }
func (r *recordingTB) Cleanup(func())           {}
func (r *recordingTB) Logf(string, ...any)      {}
func (r *recordingTB) Context() context.Context { return context.Background() }

// fails reports whether f fails the TB it is given.
func fails(f func(tb testing.TB)) bool {
	r := &recordingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

// TestHelpersFail checks that the checks do fail on what they must catch.
func TestHelpersFail(t *testing.T) {
	bad := &llmclient.Error{Class: failure.BadRequest, Message: "vendor: no"}
	call := providertest.UserCall("m")
	tests := map[string]func(tb testing.TB){
		"EqualLines":            func(tb testing.TB) { providertest.EqualLines(tb, []string{"a"}, []string{"b"}) },
		"CheckClass class":      func(tb testing.TB) { providertest.CheckClass(tb, bad, failure.Auth, 0, 0) },
		"CheckClass status":     func(tb testing.TB) { providertest.CheckClass(tb, bad, failure.BadRequest, 400, 0) },
		"CheckClass retry":      func(tb testing.TB) { providertest.CheckClass(tb, bad, failure.BadRequest, 0, 1) },
		"AsError":               func(tb testing.TB) { providertest.AsError(tb, errors.New("plain")) },
		"Complete":              func(tb testing.TB) { providertest.Complete(tb, provider{err: bad}, call) },
		"CompleteError success": func(tb testing.TB) { providertest.CompleteError(tb, provider{}, call) },
		"CheckBadRequest class": func(tb testing.TB) {
			providertest.CheckBadRequest(tb, provider{err: &llmclient.Error{Class: failure.Auth}}, "vendor", call)
		},
		"CheckBadRequest prefix": func(tb testing.TB) { providertest.CheckBadRequest(tb, provider{err: bad}, "other", call) },
		"RecvAll endless":        func(tb testing.TB) { providertest.RecvAll(tb, &script{chunks: make([]llmclient.Chunk, 4)}, 3) },
		"FuzzRecv no class": func(tb testing.TB) {
			providertest.FuzzRecv(tb, &script{err: &llmclient.Error{}}, 3)
		},
		"DrainError plain": func(tb testing.TB) { providertest.DrainError(tb, &script{err: errors.New("plain")}) },
		"Golden differs": func(tb testing.TB) {
			providertest.Golden(tb, "x.json", []byte(`{"a":2}`), false)
		},
		"Golden not JSON": func(tb testing.TB) { providertest.Golden(tb, "x.json", []byte(`{`), false) },
		"Golden missing":  func(tb testing.TB) { providertest.Golden(tb, "missing.json", []byte(`{}`), false) },
	}
	t.Chdir(t.TempDir())
	if err := os.Mkdir("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/x.json", []byte("{\n  \"a\": 1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, f := range tests {
		if !fails(f) {
			t.Errorf("%s did not fail", name)
		}
	}
	if fails(func(tb testing.TB) { providertest.Golden(tb, "x.json", []byte(`{"a":1}`), false) }) {
		t.Error("Golden failed on an equal body")
	}
}
