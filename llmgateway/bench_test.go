package llmgateway_test

import (
	"io"
	"net/http"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkGatewayOverhead sends requests one after another through the gateway to a
// loopback upstream that answers at once, and reports the gateway's own
// x-llmclient-overhead-ms (p50, p99) and the client-side time to the first byte; the
// direct rows send the same requests to the upstream without the gateway. goroutines/op
// counts the goroutines started per request in the whole process.
//
//	go test -run '^$' -bench GatewayOverhead -benchtime 2000x .
func BenchmarkGatewayOverhead(b *testing.B) {
	for _, direct := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			name := "gateway"
			if direct {
				name = "direct"
			}
			b.Run(name+"/stream="+strconv.FormatBool(stream), func(b *testing.B) {
				oa, an := newVendor(b, "openai"), newVendor(b, "anthropic")
				g := startGatewayB(b, baseConfig(oa, an, ""))
				body := `{"model":"gpt-4o","stream":` + strconv.FormatBool(stream) + `,"messages":[{"role":"user","content":"Say hello."}]}`
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				defer hc.CloseIdleConnections()
				var over, first []float64
				b.ReportAllocs()
				created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
				metrics.Read(created)
				created0 := created[0].Value.Uint64()
				b.ResetTimer()
				for range b.N {
					url := g.api.URL
					if direct {
						url = oa.URL
					}
					req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer gw-key-a")
					start := time.Now()
					resp, err := hc.Do(req)
					if err != nil || resp.StatusCode != 200 {
						b.Fatal(err, resp)
					}
					buf := make([]byte, 1)
					_, _ = io.ReadFull(resp.Body, buf)
					first = append(first, float64(time.Since(start).Microseconds())/1000)
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					o, _ := strconv.ParseFloat(resp.Header.Get("x-llmclient-overhead-ms"), 64)
					over = append(over, o)
				}
				b.StopTimer()
				metrics.Read(created)
				// Goroutines started per request in this process: the test's client, the
				// gateway and the loopback upstream (the direct rows hold the client's and
				// the upstream's share).
				b.ReportMetric(float64(created[0].Value.Uint64()-created0)/float64(b.N), "goroutines/op")
				slices.Sort(over)
				slices.Sort(first)
				q := func(v []float64, p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
				b.ReportMetric(q(over, 0.5), "overhead-p50-ms")
				b.ReportMetric(q(over, 0.99), "overhead-p99-ms")
				b.ReportMetric(q(first, 0.5), "first-byte-p50-ms")
				b.ReportMetric(q(first, 0.99), "first-byte-p99-ms")
			})
		}
	}
}
