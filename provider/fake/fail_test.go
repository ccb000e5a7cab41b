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
	"github.com/llmclient/llmclient/provider/fake"
)

func TestFailStatusClass(t *testing.T) {
	tests := []struct {
		status int
		want   llmclient.Class
	}{
		{429, llmclient.ClassRateLimited},
		{402, llmclient.ClassQuotaExhausted},
		{529, llmclient.ClassOverloaded},
		{503, llmclient.ClassOverloaded},
		{500, llmclient.ClassServerError},
		{502, llmclient.ClassServerError},
		{504, llmclient.ClassServerError},
		{599, llmclient.ClassServerError},
		{400, llmclient.ClassBadRequest},
		{413, llmclient.ClassBadRequest},
		{422, llmclient.ClassBadRequest},
		{418, llmclient.ClassBadRequest},
		{401, llmclient.ClassAuth},
		{403, llmclient.ClassPermission},
		{404, llmclient.ClassNotFound},
		{408, llmclient.ClassTimeout},
		{200, llmclient.ClassUnknown},
		{0, llmclient.ClassUnknown},
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
	want := map[llmclient.Class]int{
		llmclient.ClassRateLimited:     429,
		llmclient.ClassQuotaExhausted:  429,
		llmclient.ClassOverloaded:      503,
		llmclient.ClassServerError:     500,
		llmclient.ClassTimeout:         408,
		llmclient.ClassBadRequest:      400,
		llmclient.ClassContextLength:   400,
		llmclient.ClassContentFiltered: 400,
		llmclient.ClassAuth:            401,
		llmclient.ClassPermission:      403,
		llmclient.ClassNotFound:        404,
	}
	for c := llmclient.ClassUnknown; c <= llmclient.ClassUnavailable; c++ {
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
			if s := want[c]; s != 0 && s != 400 && c != llmclient.ClassQuotaExhausted && fake.ClassForStatus(s) != c {
				t.Errorf("ClassForStatus(StatusForClass(%v)) = %v", c, fake.ClassForStatus(s))
			}
		})
	}
	_, err := fake.New(fake.FailClass(llmclient.ClassNone)).Complete(context.Background(), call("m"))
	if llmclient.ClassOf(err) != llmclient.ClassUnknown {
		t.Errorf("FailClass(ClassNone): class %v, want unknown", llmclient.ClassOf(err))
	}
}

func TestFailFields(t *testing.T) {
	rl := llmclient.RateLimits{Requests: llmclient.RateWindow{Known: true, Limit: 60, Remaining: 0, Reset: 2 * time.Second}}
	p := fake.New(
		fake.Fail(429).RetryAfter(2*time.Second).Code("rate_limit_exceeded").Type("requests").
			Param("messages").Message("Rate limit reached").RequestID("req_1").ShouldRetry(true).
			RateLimits(rl).Times(2),
		fake.Fail(429).Class(llmclient.ClassQuotaExhausted).Code("insufficient_quota"),
		fake.FailClass(llmclient.ClassQuotaExhausted).Status(402),
	)
	_, err := p.Complete(context.Background(), call("m"))
	var e *llmclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *llmclient.Error", err)
	}
	if e.Class != llmclient.ClassRateLimited || e.Status != 429 || e.RetryAfter != 2*time.Second ||
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
		class  llmclient.Class
		status int
	}{{llmclient.ClassQuotaExhausted, 429}, {llmclient.ClassQuotaExhausted, 402}} {
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
	if llmclient.ClassOf(err) != llmclient.ClassOverloaded {
		t.Errorf("err = %v, want overloaded", err)
	}
}

func TestFailLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).Latency(3*time.Second), fake.Error(syscall.ECONNREFUSED).Latency(time.Second))
		start := time.Now()
		_, err := p.Complete(context.Background(), call("m"))
		if took := time.Since(start); took != 3*time.Second || llmclient.ClassOf(err) != llmclient.ClassServerError {
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
		class llmclient.Class
	}{
		{"op error", opErr, llmclient.ClassNetwork},
		{"reset", reset, llmclient.ClassNetwork},
		{"deadline", context.DeadlineExceeded, llmclient.ClassTimeout},
		{"custom", custom, llmclient.ClassUnknown},
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
	if err == nil || llmclient.ClassOf(err) != llmclient.ClassUnknown {
		t.Errorf("Error(nil): err = %v, want a class unknown error", err)
	}
}
