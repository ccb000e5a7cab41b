package fake_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

func TestFailStatusClass(t *testing.T) {
	tests := []struct {
		status int
		want   failure.Class
	}{
		{429, failure.RateLimited},
		{402, failure.QuotaExhausted},
		{529, failure.Overloaded},
		{503, failure.Overloaded},
		{500, failure.ServerError},
		{502, failure.ServerError},
		{504, failure.ServerError},
		{599, failure.ServerError},
		{400, failure.BadRequest},
		{413, failure.BadRequest},
		{422, failure.BadRequest},
		{418, failure.BadRequest},
		{401, failure.Auth},
		{403, failure.Permission},
		{404, failure.NotFound},
		{408, failure.Timeout},
		{200, failure.Unknown},
		{0, failure.Unknown},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			p := fake.New(fake.Fail(tt.status))
			_, err := p.Complete(context.Background(), call("m"))
			var e *llmclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *llmclient.Error", err)
			}
			if e.Class != tt.want || e.Status != tt.status || llmclient.ClassOf(err) != tt.want {
				t.Errorf("class %v status %d, want %v %d", e.Class, e.Status, tt.want, tt.status)
			}
			if fake.ClassForStatus(tt.status) != tt.want {
				t.Errorf("ClassForStatus(%d) = %v, want %v", tt.status, fake.ClassForStatus(tt.status), tt.want)
			}
		})
	}
}

func TestFailClassStatus(t *testing.T) {
	want := map[failure.Class]int{
		failure.RateLimited:     429,
		failure.QuotaExhausted:  429,
		failure.Overloaded:      503,
		failure.ServerError:     500,
		failure.Timeout:         408,
		failure.BadRequest:      400,
		failure.ContextLength:   400,
		failure.ContentFiltered: 400,
		failure.Auth:            401,
		failure.Permission:      403,
		failure.NotFound:        404,
	}
	for c := failure.Unknown; c <= failure.Unavailable; c++ {
		t.Run(c.String(), func(t *testing.T) {
			_, err := fake.New(fake.FailClass(c)).Complete(context.Background(), call("m"))
			var e *llmclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *llmclient.Error", err)
			}
			if e.Class != c || e.Status != want[c] {
				t.Errorf("got class %v status %d, want %v %d", e.Class, e.Status, c, want[c])
			}
			wantMsg := fmt.Sprintf("fake: status %d", want[c])
			if want[c] == 0 {
				wantMsg = "fake: " + c.String()
			}
			if e.Message != wantMsg {
				t.Errorf("Message = %q, want %q", e.Message, wantMsg)
			}
			// A class with a typical status maps back to itself through the status table,
			// except where several classes share one status.
			if s := want[c]; s != 0 && s != 400 && c != failure.QuotaExhausted && fake.ClassForStatus(s) != c {
				t.Errorf("ClassForStatus(StatusForClass(%v)) = %v", c, fake.ClassForStatus(s))
			}
		})
	}
	_, err := fake.New(fake.FailClass(failure.None)).Complete(context.Background(), call("m"))
	if llmclient.ClassOf(err) != failure.Unknown {
		t.Errorf("FailClass(ClassNone): class %v, want unknown", llmclient.ClassOf(err))
	}
}

func TestFailFields(t *testing.T) {
	rl := ratelimit.Status{Requests: ratelimit.Window{Known: true, Limit: 60, Remaining: 0, Reset: 2 * time.Second}}
	p := fake.New(
		fake.Fail(429).RetryAfter(2*time.Second).Code("rate_limit_exceeded").Type("requests").
			Param("messages").Message("Rate limit reached").RequestID("req_1").ShouldRetry(true).
			RateLimits(rl).Times(2),
		fake.Fail(429).Class(failure.QuotaExhausted).Code("insufficient_quota"),
		fake.FailClass(failure.QuotaExhausted).Status(402),
	)
	_, err := p.Complete(context.Background(), call("m"))
	var e *llmclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *llmclient.Error", err)
	}
	if e.Class != failure.RateLimited || e.Status != 429 || e.RetryAfter != 2*time.Second ||
		e.Code != "rate_limit_exceeded" || e.Type != "requests" || e.Param != "messages" ||
		e.Message != "Rate limit reached" || e.RequestID != "req_1" ||
		e.ShouldRetry == nil || !*e.ShouldRetry || e.RateLimits == nil || *e.RateLimits != rl {
		t.Errorf("error fields = %+v", e)
	}
	if want := "llmclient: rate_limited: status 429: rate_limit_exceeded: Rate limit reached"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}

	// The caller may annotate the error it got; the next play must not see that.
	e.Upstream, e.Message, *e.ShouldRetry, e.RateLimits.Requests.Limit = "u", "x", false, 1
	_, err2 := p.Complete(context.Background(), call("m"))
	var e2 *llmclient.Error
	if !errors.As(err2, &e2) || e2 == e || e2.Upstream != "" || e2.Message != "Rate limit reached" ||
		!*e2.ShouldRetry || *e2.RateLimits != rl {
		t.Errorf("second play shares state with the first: %+v", e2)
	}

	for _, want := range []struct {
		class  failure.Class
		status int
	}{{failure.QuotaExhausted, 429}, {failure.QuotaExhausted, 402}} {
		_, err := p.Complete(context.Background(), call("m"))
		if !errors.As(err, &e) || e.Class != want.class || e.Status != want.status {
			t.Errorf("got %v, want class %v status %d", err, want.class, want.status)
		}
	}
}

func TestFailOnStream(t *testing.T) {
	p := fake.New(fake.Fail(529).Type("overloaded_error"))
	st, err := p.Stream(context.Background(), call("m"))
	if st != nil {
		t.Error("Stream returned a stream with its error")
	}
	if llmclient.ClassOf(err) != failure.Overloaded {
		t.Errorf("err = %v, want overloaded", err)
	}
}

func TestFailLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).Latency(3*time.Second), fake.Error(syscall.ECONNREFUSED).Latency(time.Second))
		start := time.Now()
		_, err := p.Complete(context.Background(), call("m"))
		if took := time.Since(start); took != 3*time.Second || llmclient.ClassOf(err) != failure.ServerError {
			t.Errorf("took %v, err %v; want 3s and a server error", took, err)
		}
		_, err = p.Stream(context.Background(), call("m"))
		if took := time.Since(start); took != 4*time.Second || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("took %v, err %v; want 4s and ECONNREFUSED", took, err)
		}
	})
}

func TestErrorStep(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := fmt.Errorf("read tcp: %w", syscall.ECONNRESET)
	custom := errors.New("something odd")
	tests := []struct {
		name  string
		err   error
		class failure.Class
	}{
		{"op error", opErr, failure.Network},
		{"reset", reset, failure.Network},
		{"deadline", context.DeadlineExceeded, failure.Timeout},
		{"custom", custom, failure.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(fake.Error(tt.err).Times(2))
			_, err := p.Complete(context.Background(), call("m"))
			if err != tt.err {
				t.Errorf("Complete err = %v, want the step's error as is", err)
			}
			if llmclient.ClassOf(err) != tt.class {
				t.Errorf("class = %v, want %v", llmclient.ClassOf(err), tt.class)
			}
			st, err := p.Stream(context.Background(), call("m"))
			if st != nil || err != tt.err {
				t.Errorf("Stream = %v, %v; want nil and the step's error", st, err)
			}
		})
	}
	_, err := fake.New(fake.Error(nil)).Complete(context.Background(), call("m"))
	if err == nil || llmclient.ClassOf(err) != failure.Unknown {
		t.Errorf("Error(nil): err = %v, want a class unknown error", err)
	}
}
