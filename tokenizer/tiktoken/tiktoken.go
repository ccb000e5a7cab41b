// Package tiktoken is an exact token estimator for llmclient, built on OpenAI's BPE
// encodings through github.com/pkoukk/tiktoken-go.
//
// It never touches the network: importing the package installs the offline loader of
// github.com/pkoukk/tiktoken-go-loader, whose BPE files are embedded in the binary (about
// 7 MB), and each encoding is loaded lazily, once per process, the first time a model that
// uses it is counted. Because of that weight it lives in its own package: binaries that use
// only llmclient's default heuristic estimator do not carry the BPE files.
//
// Use it with llmclient.WithEstimator(tiktoken.Estimator{}).
package tiktoken

import (
	"github.com/llmclient/llmclient/estimate"
	"sync"
	"sync/atomic"

	tk "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// The encodings the package can load.
const (
	O200kBase  = "o200k_base"  // GPT-4o, GPT-4.1, GPT-4.5, o-series, GPT-5
	CL100kBase = "cl100k_base" // GPT-4, GPT-3.5, text-embedding-3
	P50kBase   = "p50k_base"   // Codex, text-davinci-002/003
	R50kBase   = "r50k_base"   // GPT-3
)

// offline is the BPE loader tiktoken-go uses: the embedded files, never a download. It
// counts loads so tests can check that each encoding is loaded once.
type offline struct {
	files *loader.OfflineLoader
	loads atomic.Int64
}

func (o *offline) LoadTiktokenBpe(file string) (map[string]int, error) {
	o.loads.Add(1)
	return o.files.LoadTiktokenBpe(file)
}

var bpeLoader = &offline{files: loader.NewOfflineLoader()}

// init installs the offline loader before any goroutine of the program can use
// tiktoken-go: its loader is a package variable without synchronization. A program that
// installs another loader afterwards replaces it for this package too.
func init() { tk.SetBpeLoader(bpeLoader) }

// encoding is one lazily loaded encoding.
type encoding struct {
	once sync.Once
	enc  *tk.Tiktoken
	err  error
}

func (e *encoding) get(name string) (*tk.Tiktoken, error) {
	e.once.Do(func() { e.enc, e.err = tk.GetEncoding(name) })
	return e.enc, e.err
}

// encodings is fixed at init; only the entries' contents change, each once.
var encodings = map[string]*encoding{
	O200kBase: {}, CL100kBase: {}, P50kBase: {}, R50kBase: {},
}

// Count returns the number of tokens of text in the named encoding, treating special-token
// text such as "<|endoftext|>" as ordinary text. The first call for an encoding loads it
// (tens to hundreds of milliseconds); later calls reuse it. It is safe for concurrent use.
func Count(encodingName, text string) (int, error) {
	e, ok := encodings[encodingName]
	if !ok {
		return 0, &UnknownEncodingError{Name: encodingName}
	}
	enc, err := e.get(encodingName)
	if err != nil {
		return 0, err
	}
	if text == "" {
		return 0, nil
	}
	return len(enc.EncodeOrdinary(text)), nil
}

// UnknownEncodingError is returned by Count for an encoding the package does not have.
type UnknownEncodingError struct{ Name string }

func (e *UnknownEncodingError) Error() string {
	return "tiktoken: unknown encoding " + e.Name
}

// Estimator is an llmclient.Estimator that counts exactly with the encoding of the model,
// as estimate.EncodingForModel names it: o200k_base for current OpenAI models and for
// other vendors' models (llmclient applies its correction ratio for those), cl100k_base for
// GPT-4 and GPT-3.5. The zero value is ready to use and safe for concurrent use.
//
// It is about a hundred times slower than estimate.Heuristic (see BENCHMARKS.md).
// Should an embedded encoding fail to load, which does not happen with an intact build, it
// falls back to estimate.Heuristic.
type Estimator struct{}

// CountTokens returns the exact number of tokens of text for model.
func (Estimator) CountTokens(model, text string) int {
	n, err := Count(estimate.EncodingForModel(model), text)
	if err != nil {
		return estimate.Heuristic{}.CountTokens(model, text)
	}
	return n
}
