package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// Golden compares got, a JSON body, indented, with the file testdata/name, or rewrites the
// file when update is set (a test package's -update flag).
func Golden(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("body differs from %s:\ngot:\n%s\nwant:\n%s", path, buf.Bytes(), want)
	}
}

// EqualLines fails t unless got and want hold the same lines, showing both.
func EqualLines(t testing.TB, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// AsError returns err as an *llmclient.Error, failing t when it is not one.
func AsError(t testing.TB, err error) *llmclient.Error {
	t.Helper()
	var e *llmclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *llmclient.Error", err, err)
	}
	return e
}

// CheckClass checks a classified error's class, status and RetryAfter.
func CheckClass(t testing.TB, e *llmclient.Error, class failure.Class, status int, retry time.Duration) {
	t.Helper()
	if e.Class != class {
		t.Errorf("class = %v, want %v (%v)", e.Class, class, e)
	}
	if e.Status != status {
		t.Errorf("status = %d", e.Status)
	}
	if e.RetryAfter != retry {
		t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, retry)
	}
}

// Complete runs p.Complete and returns the response, failing t on an error.
func Complete(t testing.TB, p llmclient.Provider, call *llmclient.Call) *llmclient.Response {
	t.Helper()
	resp, err := p.Complete(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// CompleteError runs p.Complete and returns its *llmclient.Error, failing t when Complete
// succeeds or fails with another error.
func CompleteError(t testing.TB, p llmclient.Provider, call *llmclient.Call) *llmclient.Error {
	t.Helper()
	resp, err := p.Complete(context.Background(), call)
	if err == nil {
		t.Fatalf("Complete succeeded: %+v", resp)
	}
	return AsError(t, err)
}

// CheckBadRequest checks that p refuses call before sending it: Complete fails with a
// bad_request error whose text has the adapter's prefix "<pkg>: ". (That nothing reached
// the server is the caller's check: see Server.Len.)
func CheckBadRequest(t testing.TB, p llmclient.Provider, pkg string, call *llmclient.Call) {
	t.Helper()
	_, err := p.Complete(context.Background(), call)
	if llmclient.ClassOf(err) != failure.BadRequest {
		t.Fatalf("err = %v (class %v), want a bad_request error", err, llmclient.ClassOf(err))
	}
	if !strings.Contains(err.Error(), pkg+": ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}

// Exchange sends call through p: with Complete, or with Stream read to its end and closed
// when stream is true. It fails t on any error.
func Exchange(t testing.TB, p llmclient.Provider, call *llmclient.Call, stream bool) {
	t.Helper()
	if !stream {
		if _, err := p.Complete(context.Background(), call); err != nil {
			t.Fatal(err)
		}
		return
	}
	st, err := p.Stream(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := Drain(st); err != nil {
		t.Fatal(err)
	}
}
