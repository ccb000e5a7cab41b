// Command gwload measures an OpenAI-compatible gateway under open-loop load: requests
// leave at a constant arrival rate whatever the answers do (no closed loop, so a slow
// gateway cannot slow the load down and hide its own queueing), and each latency is
// measured from the moment the request was due.
//
//	gwload mock -listen 127.0.0.1:9100
//	gwload proxy -listen 127.0.0.1:9104 -upstream http://127.0.0.1:9100
//	gwload sweep -direct http://127.0.0.1:9100/v1 \
//	    -target 'llmgateway=http://127.0.0.1:9101/v1,pid=1234,header=Authorization: Bearer k' \
//	    -target 'portkey=http://127.0.0.1:9102/v1,pid=5678,header=x-portkey-provider: openai' \
//	    -rates 50,200,500,1000,1500 -duration 8s
//
// mock is a loopback OpenAI-compatible upstream that answers at once (one-shot and SSE).
// proxy is the floor a Go gateway built on net/http starts from: a bare reverse proxy
// (a net/http server, and an http.Transport to the upstream) that reads each request
// body, sends it on and copies the answer back, flushing every read; no
// authentication, parsing, limiting or logging.
// sweep sends, at each rate and for one-shot then streaming requests, the same load
// to the upstream directly and then through each target in turn, and prints per
// target: p50/p99 latency, overhead (latency less the direct latency at the same rate
// and percentile), time to the first chunk of a stream and how late it is against the
// direct stream, and the target process's CPU time per request (utime+stime from
// /proc/PID/stat over the measured window). With -paired, each target is driven at the
// same time as the upstream directly, at the same rate, the two schedules interleaved,
// and its overhead is taken against those direct requests: a pause of the machine or
// of the load generator then lands on both sides of the difference, where without it a
// p99 overhead is the difference of two tails measured seconds apart. See
// llmgateway/bench/run.sh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gwload mock|sweep [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "mock":
		err = mock(os.Args[2:])
	case "proxy":
		err = proxy(os.Args[2:])
	case "sweep":
		err = sweep(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gwload:", err)
		os.Exit(1)
	}
}

var (
	oneShot = []byte(`{"id":"chatcmpl-mock","object":"chat.completion","created":1,"model":"mock-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`)
	chunks  = []string{
		`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1,"model":"mock-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello!"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1,"model":"mock-1","choices":[{"index":0,"delta":{"content":" How can I"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1,"model":"mock-1","choices":[{"index":0,"delta":{"content":" help you today?"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1,"model":"mock-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1,"model":"mock-1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`,
		`[DONE]`,
	}
)

// mock serves POST /v1/chat/completions: the one-shot answer, or with "stream":true
// the chunks, each flushed as it is written, with no delay.
func mock(args []string) error {
	fs := flag.NewFlagSet("mock", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9100", "address (loopback)")
	_ = fs.Parse(args)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "gwload mock on", ln.Addr())
	var sse bytes.Buffer
	for _, c := range chunks {
		sse.WriteString("data: " + c + "\n\n")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) && !bytes.Contains(body, []byte(`"stream": true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(oneShot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		f := w.(http.Flusher)
		for _, c := range chunks {
			_, _ = io.WriteString(w, "data: "+c+"\n\n")
			f.Flush()
		}
	})
	return (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

// proxy forwards every POST to the same path on upstream and copies the status, the
// content type and the body back, flushing after each read of the upstream body.
func proxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9104", "address (loopback)")
	upstream := fs.String("upstream", "http://127.0.0.1:9100", "the upstream's origin")
	_ = fs.Parse(args)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "gwload proxy on", ln.Addr(), "to", *upstream)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	hc := &http.Client{Transport: tr}
	origin := strings.TrimSuffix(*upstream, "/")
	h := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, origin+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		f := w.(http.Flusher)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				f.Flush()
			}
			if err != nil {
				return
			}
		}
	}
	return (&http.Server{Handler: http.HandlerFunc(h), ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

type target struct {
	name    string
	url     string // base URL, ending in /v1
	pid     int
	headers [][2]string
	stopped map[bool]bool // per stream mode: saturated at a lower rate, higher rates skipped
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// parseTarget reads "name=URL[,pid=N][,header=K: V]...".
func parseTarget(s string) (*target, error) {
	parts := strings.Split(s, ",")
	name, url, ok := strings.Cut(parts[0], "=")
	if !ok {
		return nil, fmt.Errorf("target %q: want name=URL", s)
	}
	t := &target{name: name, url: strings.TrimSuffix(url, "/"), stopped: map[bool]bool{}}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "pid":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("target %q: bad pid %q", s, v)
			}
			t.pid = n
		case "header":
			hk, hv, ok := strings.Cut(v, ":")
			if !ok {
				return nil, fmt.Errorf("target %q: header %q: want K: V", s, v)
			}
			t.headers = append(t.headers, [2]string{strings.TrimSpace(hk), strings.TrimSpace(hv)})
		default:
			return nil, fmt.Errorf("target %q: unknown field %q", s, k)
		}
	}
	return t, nil
}

// result is one step: one target, one rate, one mode.
type result struct {
	Target   string  `json:"target"`
	Stream   bool    `json:"stream"`
	Rate     int     `json:"rate"`
	Sent     int     `json:"sent"`
	OK       int     `json:"ok"`
	Errors   int     `json:"errors"`
	Achieved float64 `json:"achieved_rps"`
	LateP99  float64 `json:"generator_late_p99_ms"` // how late the generator sent (its own limit)
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	First50  float64 `json:"first_chunk_p50_ms,omitempty"`
	First99  float64 `json:"first_chunk_p99_ms,omitempty"`
	CPUms    float64 `json:"cpu_ms_per_request,omitempty"`
	// Against the direct step at the same rate and mode.
	Over50     float64 `json:"overhead_p50_ms"`
	Over99     float64 `json:"overhead_p99_ms"`
	FirstLat50 float64 `json:"first_chunk_late_p50_ms,omitempty"`
	FirstLat99 float64 `json:"first_chunk_late_p99_ms,omitempty"`
	LoadAvg    string  `json:"loadavg"`
	// With -paired: the direct requests sent in the same window, the anchor.
	Paired     bool    `json:"paired,omitempty"`
	AnchorP50  float64 `json:"anchor_p50_ms,omitempty"`
	AnchorP99  float64 `json:"anchor_p99_ms,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
}

func sweep(args []string) error {
	fs := flag.NewFlagSet("sweep", flag.ExitOnError)
	direct := fs.String("direct", "http://127.0.0.1:9100/v1", "the upstream's base URL, for the anchor")
	var targets multiFlag
	fs.Var(&targets, "target", "name=URL[,pid=N][,header=K: V]... (repeatable)")
	ratesF := fs.String("rates", "50,200,500,1000,1500", "arrival rates, requests per second")
	dur := fs.Duration("duration", 8*time.Second, "measured time per step")
	warm := fs.Duration("warmup", 2*time.Second, "unmeasured time at the same rate before each step")
	pause := fs.Duration("pause", time.Second, "idle time between steps")
	modes := fs.String("modes", "oneshot,stream", "oneshot, stream or both")
	model := fs.String("model", "gpt-4o-mini", "model name sent")
	timeout := fs.Duration("timeout", 10*time.Second, "per-request timeout")
	stopAt := fs.Float64("stop-p50-ms", 50, "skip a target's higher rates once it is saturated: its p50 overhead exceeds this, more than 1% of its requests fail or it answers less than 90% of the rate")
	jsonOut := fs.String("json", "", "also write the results as JSON lines to this file")
	paired := fs.Bool("paired", false, "drive each target and the upstream directly at the same time, at the same rate, their requests interleaved (each direct request half an interval after a target's), and take each target's overhead against the direct requests of its own window: machine noise then falls on both alike")
	_ = fs.Parse(args)

	var rates []int
	for _, s := range strings.Split(*ratesF, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n > 100000 {
			return fmt.Errorf("bad rate %q", s)
		}
		rates = append(rates, n)
	}
	ts := []*target{{name: "direct", url: strings.TrimSuffix(*direct, "/"), stopped: map[bool]bool{}}}
	for _, s := range targets {
		t, err := parseTarget(s)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	var out io.Writer = io.Discard
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	var all []result
	emit := func(r result) {
		all = append(all, r)
		line, _ := json.Marshal(r)
		fmt.Fprintf(out, "%s\n", line)
		fmt.Fprintf(os.Stderr, "%-10s stream=%-5v rate=%-5d achieved=%7.1f ok=%d err=%d p50=%.3f p99=%.3f over=%.3f/%.3f first=%.3f/%.3f late=%.3f/%.3f cpu/req=%.3fms gen-late-p99=%.2f load=%s\n",
			r.Target, r.Stream, r.Rate, r.Achieved, r.OK, r.Errors, r.P50, r.P99, r.Over50, r.Over99, r.First50, r.First99, r.FirstLat50, r.FirstLat99, r.CPUms, r.LateP99, r.LoadAvg)
	}
	for _, m := range strings.Split(*modes, ",") {
		stream := strings.TrimSpace(m) == "stream"
		for _, rate := range rates {
			var anchor *result
			for _, t := range ts {
				if t.stopped[stream] || (*paired && t == ts[0]) {
					continue
				}
				time.Sleep(*pause)
				lanes := []*target{t}
				if *paired {
					lanes = append(lanes, ts[0])
				}
				rs, err := step(lanes, stream, rate, *warm, *dur, *timeout, *model)
				if err != nil {
					return err
				}
				r := rs[0]
				if *paired {
					anchor = &rs[1]
					r.Paired = true
					r.AnchorP50, r.AnchorP99 = anchor.P50, anchor.P99
				}
				if anchor == nil {
					anchor = &r
				} else {
					r.Over50, r.Over99 = r.P50-anchor.P50, r.P99-anchor.P99
					if stream {
						r.FirstLat50, r.FirstLat99 = r.First50-anchor.First50, r.First99-anchor.First99
					}
					if r.Over50 > *stopAt || r.Errors*100 > r.Sent || float64(r.OK) < 0.9*float64(r.Sent) {
						t.stopped[stream] = true
					}
				}
				emit(r)
			}
		}
	}
	printTables(all, ts)
	return nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTicks is utime+stime of pid, in clock ticks (USER_HZ, 100 on Linux).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	s, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat fields")
	}
	return u + s, nil
}

const userHZ = 100

type sample struct {
	total, first, late time.Duration
	err                error
	ok                 bool
}

// step drives each lane at rate for warm then dur, the lanes' arrivals interleaved
// evenly within each interval (lane j's request i is due j/len(lanes) of an interval
// after lane 0's), and returns one result per lane, in order.
func step(lanes []*target, stream bool, rate int, warm, dur, timeout time.Duration, model string) ([]result, error) {
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}`)
	if stream {
		body = []byte(`{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}`)
	}
	interval := time.Second / time.Duration(rate)
	nWarm := int(warm / interval)
	n := int(dur / interval)
	type lane struct {
		t          *target
		hc         *http.Client
		url        string
		offset     time.Duration
		samples    []sample
		cpu0, cpu1 int64
	}
	ls := make([]*lane, len(lanes))
	for j, t := range lanes {
		tr := &http.Transport{
			MaxIdleConns:        4096,
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		}
		defer tr.CloseIdleConnections()
		ls[j] = &lane{t: t, hc: &http.Client{Transport: tr, Timeout: timeout}, url: t.url + "/chat/completions",
			offset: time.Duration(j) * interval / time.Duration(len(lanes)), samples: make([]sample, n)}
	}
	var wg sync.WaitGroup
	var cpuErr error
	var measuredStart, lastSent time.Time
	start := time.Now()
	for i := -nWarm; i < n; i++ {
		for _, l := range ls {
			due := start.Add(time.Duration(i+nWarm)*interval + l.offset)
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
			if i == 0 && l == ls[0] {
				measuredStart = time.Now()
				for _, l := range ls {
					if l.t.pid > 0 && cpuErr == nil {
						l.cpu0, cpuErr = cpuTicks(l.t.pid)
					}
				}
			}
			wg.Add(1)
			go func(l *lane, i int, due time.Time) {
				defer wg.Done()
				s := send(l.hc, l.url, body, l.t.headers, stream, due)
				if i >= 0 {
					l.samples[i] = s
				}
			}(l, i, due)
		}
	}
	lastSent = time.Now()
	wg.Wait()
	for _, l := range ls {
		if l.t.pid > 0 && cpuErr == nil {
			l.cpu1, cpuErr = cpuTicks(l.t.pid)
		}
	}
	if cpuErr != nil {
		return nil, fmt.Errorf("%s: cpu: %w", lanes[0].name, cpuErr)
	}
	load := loadavg()
	out := make([]result, len(ls))
	for j, l := range ls {
		r := result{Target: l.t.name, Stream: stream, Rate: rate, Sent: n, LoadAvg: load}
		r.Achieved = float64(n) / lastSent.Sub(measuredStart).Seconds()
		var tot, first, late []float64
		for _, s := range l.samples {
			late = append(late, ms(s.late))
			if !s.ok {
				r.Errors++
				if r.FirstError == "" && s.err != nil {
					r.FirstError = s.err.Error()
				}
				continue
			}
			r.OK++
			tot = append(tot, ms(s.total))
			first = append(first, ms(s.first))
		}
		r.LateP99 = pct(late, 0.99)
		r.P50, r.P99 = pct(tot, 0.5), pct(tot, 0.99)
		if stream {
			r.First50, r.First99 = pct(first, 0.5), pct(first, 0.99)
		}
		if l.t.pid > 0 && r.OK > 0 {
			// The window spans the measured requests from the first send to the last
			// answer; the warm-up's requests still in flight at its start are few.
			r.CPUms = float64(l.cpu1-l.cpu0) * 1000 / userHZ / float64(n)
		}
		out[j] = r
	}
	return out, nil
}

func send(hc *http.Client, url string, body []byte, headers [][2]string, stream bool, due time.Time) sample {
	var s sample
	s.late = time.Since(due)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		s.err = err
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		s.err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		return s
	}
	if !stream {
		b, err := io.ReadAll(resp.Body)
		s.total = time.Since(due)
		if err != nil || !bytes.Contains(b, []byte(`"choices"`)) {
			s.err = fmt.Errorf("bad body: %v %.200s", err, b)
			return s
		}
		s.first, s.ok = s.total, true
		return s
	}
	// The first chunk is the first "data:" line with content; the stream must end
	// with [DONE].
	br := bufio.NewReaderSize(resp.Body, 4096)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if s.first == 0 && bytes.HasPrefix(line, []byte("data: {")) {
				s.first = time.Since(due)
			}
			if bytes.HasPrefix(line, []byte("data: [DONE]")) {
				done = true
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
				return s
			}
			break
		}
	}
	s.total = time.Since(due)
	if !done || s.first == 0 {
		s.err = errors.New("stream without a chunk or [DONE]")
		return s
	}
	s.ok = true
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(p*float64(len(v))))]
}

// printTables writes the markdown tables of BENCHMARKS.md to stdout.
func printTables(all []result, ts []*target) {
	for _, stream := range []bool{false, true} {
		mode := "one-shot"
		if stream {
			mode = "streaming"
		}
		var rows []result
		for _, r := range all {
			if r.Stream == stream {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Printf("\n%s (load average at each step's end)\n\n", mode)
		if stream {
			fmt.Println("| target | rate/s | achieved | errors | p50 / p99 ms | overhead p50 / p99 ms | first chunk p50 / p99 ms | first chunk late p50 / p99 ms | CPU ms/req | load |")
			fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		} else {
			fmt.Println("| target | rate/s | achieved | errors | p50 / p99 ms | overhead p50 / p99 ms | CPU ms/req | load |")
			fmt.Println("|---|---:|---:|---:|---:|---:|---:|---|")
		}
		for _, r := range rows {
			over := fmt.Sprintf("%.2f / %.2f", r.Over50, r.Over99)
			cpu := fmt.Sprintf("%.3f", r.CPUms)
			if r.Target == "direct" {
				over, cpu = "(anchor)", "–"
			}
			if stream {
				lateS := fmt.Sprintf("%.2f / %.2f", r.FirstLat50, r.FirstLat99)
				if r.Target == "direct" {
					lateS = "–"
				}
				fmt.Printf("| %s | %d | %.0f | %d | %.2f / %.2f | %s | %.2f / %.2f | %s | %s | %s |\n", r.Target, r.Rate, r.Achieved, r.Errors, r.P50, r.P99, over, r.First50, r.First99, lateS, cpu, r.LoadAvg)
			} else {
				fmt.Printf("| %s | %d | %.0f | %d | %.2f / %.2f | %s | %s | %s |\n", r.Target, r.Rate, r.Achieved, r.Errors, r.P50, r.P99, over, cpu, r.LoadAvg)
			}
		}
		// The highest rate that holds, every lower rate holding too.
		for _, t := range ts[1:] {
			best := 0
			for _, r := range rows {
				if r.Target != t.name {
					continue
				}
				if r.Errors > 0 || r.Over99 >= 5 || r.Achieved < 0.95*float64(r.Rate) {
					break
				}
				best = r.Rate
			}
			fmt.Printf("\n%s, %s: highest rate with p99 overhead under 5 ms and no error (at it and every lower rate): %d/s\n", t.name, mode, best)
		}
	}
}
