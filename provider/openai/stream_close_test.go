package openai

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestChunkStreamCloseUnblocksRecv holds a real loopback stream open after one chunk and
// checks that Close, from other goroutines, unblocks a Recv waiting on the network.
func TestChunkStreamCloseUnblocksRecv(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ev(helloChunk))
		w.(http.Flusher).Flush()
		select { // stall: no [DONE], no EOF
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	s := newChunkStream(resp)
	if c, err := s.Recv(); err != nil || c.Text != "Hello" {
		t.Fatalf("first chunk %+v, %v", c, err)
	}

	recvErr := make(chan error, 1)
	go func() {
		_, err := s.Recv() // blocks: the server sends nothing more
		recvErr <- err
	}()
	select {
	case err := <-recvErr:
		t.Fatalf("Recv returned before Close: %v", err)
	case <-time.After(50 * time.Millisecond):
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()

	select {
	case err := <-recvErr:
		if err == nil || errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Recv after Close returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock Recv")
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("Recv after Close succeeded")
	}
}
