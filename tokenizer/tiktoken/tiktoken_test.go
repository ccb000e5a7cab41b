package tiktoken

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient/estimate"
)

var _ estimate.Estimator = Estimator{}

func TestCount(t *testing.T) {
	for _, enc := range []string{O200kBase, CL100kBase, P50kBase, R50kBase} {
		if n, err := Count(enc, "hello world"); err != nil || n != 2 {
			t.Errorf("Count(%s, hello world) = %d, %v; want 2", enc, n, err)
		}
		if n, err := Count(enc, ""); err != nil || n != 0 {
			t.Errorf("Count(%s, \"\") = %d, %v", enc, n, err)
		}
	}
	// Special-token text is ordinary text.
	if n, err := Count(O200kBase, "<|endoftext|>"); err != nil || n <= 1 {
		t.Errorf("special token text counted as %d, %v", n, err)
	}
	var unknown *UnknownEncodingError
	if _, err := Count("gpt2", "x"); !errors.As(err, &unknown) || !strings.HasPrefix(err.Error(), "tiktoken: ") {
		t.Errorf("unknown encoding: %v", err)
	}
}

func TestEstimatorUsesTheModelsEncoding(t *testing.T) {
	zh := "城市的夜晚，路灯一盏接一盏地亮起来。"
	o, _ := Count(O200kBase, zh)
	c, _ := Count(CL100kBase, zh)
	if o == c {
		t.Fatal("test text counts the same in both encodings")
	}
	e := Estimator{}
	for model, want := range map[string]int{"gpt-4o": o, "gpt-4": c, "gpt-3.5-turbo": c, "claude-sonnet-4-5": o, "": o} {
		if got := e.CountTokens(model, zh); got != want {
			t.Errorf("CountTokens(%q) = %d, want %d", model, got, want)
		}
	}
}

// childEnv marks the process that TestLoadsOfflineOncePerEncoding starts.
const childEnv = "LLMCLIENT_TIKTOKEN_OFFLINE_CHILD"

// TestLoadsOfflineOncePerEncoding runs the check in a fresh process, where no encoding is
// loaded yet: with every HTTP request failing and an empty download cache, many goroutines
// count with every encoding at once; each encoding must be loaded exactly once, by the
// embedded loader, and nothing may touch the network.
func TestLoadsOfflineOncePerEncoding(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		offlineChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadsOfflineOncePerEncoding$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TIKTOKEN_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "offline child ok") {
		t.Fatalf("child process: %v\n%s", err, out)
	}
}

type noNetwork struct {
	mu    sync.Mutex
	calls []string
}

func (n *noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	n.mu.Lock()
	n.calls = append(n.calls, r.URL.String())
	n.mu.Unlock()
	return nil, errors.New("network use is forbidden in this test")
}

func offlineChild(t *testing.T) {
	if n := bpeLoader.loads.Load(); n != 0 {
		t.Fatalf("%d encodings loaded before the test", n)
	}
	nn := &noNetwork{}
	saved := http.DefaultTransport
	http.DefaultTransport = nn
	defer func() { http.DefaultTransport = saved }()

	encs := []string{O200kBase, CL100kBase, P50kBase, R50kBase}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			enc := encs[g%len(encs)]
			if n, err := Count(enc, "hello world"); err != nil || n != 2 {
				t.Errorf("Count(%s) = %d, %v", enc, n, err)
			}
		})
	}
	wg.Wait()
	if len(nn.calls) != 0 {
		t.Fatalf("network used: %v", nn.calls)
	}
	if n := bpeLoader.loads.Load(); n != int64(len(encs)) {
		t.Fatalf("%d loads for %d encodings, want one each", n, len(encs))
	}
	t.Log("offline child ok")
}

// TestRootPackageDoesNotEmbedBPE checks that the BPE files stay out of binaries that do not
// import this package.
func TestRootPackageDoesNotEmbedBPE(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/llmclient/llmclient").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "pkoukk/tiktoken") {
			t.Fatalf("the root package depends on %s", dep)
		}
	}
}
