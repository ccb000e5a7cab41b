package llmclient

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/llmclient/llmclient/dialect"
	"github.com/stretchr/testify/assert"
)

// Tool-call deltas assemble by index whatever their order and however many calls there
// are: the accumulator (a map past manyCalls calls) agrees with assembling by a search
// over the calls, in the order each index first carried something (an id, a name or
// arguments; a delta that carries nothing adds no call).
func TestAccumulateToolCallsByIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		calls := 1 + rng.IntN(3*manyCalls)
		var chunks []Chunk
		for range rng.IntN(400) {
			ix := rng.IntN(calls) * (1 + round%3) // sparse indices too
			d := dialect.ToolCallDelta{Index: ix, Arguments: strconv.Itoa(rng.IntN(10))}
			switch rng.IntN(6) {
			case 0:
				d.ID, d.Name = "id"+strconv.Itoa(ix), "f"+strconv.Itoa(ix)
			case 1:
				d.Arguments = "" // carries nothing
			}
			ch := Chunk{ToolCalls: []dialect.ToolCallDelta{d}}
			if rng.IntN(3) == 0 { // a second delta in the same chunk, often the same index
				ch.ToolCalls = append(ch.ToolCalls, dialect.ToolCallDelta{Index: ix, Arguments: "x"})
			}
			chunks = append(chunks, ch)
		}
		assert.Equal(t, referenceToolCalls(chunks), accumulate(chunks).ToolCalls, "round %d", round)
	}
}

// referenceToolCalls assembles tool calls by a plain search: the oracle of the test above.
func referenceToolCalls(chunks []Chunk) []ToolCall {
	var order []int
	byIndex := map[int]*ToolCall{}
	for _, ch := range chunks {
		for _, d := range ch.ToolCalls {
			if d.ID == "" && d.Name == "" && d.Arguments == "" {
				continue
			}
			tc, ok := byIndex[d.Index]
			if !ok {
				tc = &ToolCall{}
				byIndex[d.Index] = tc
				order = append(order, d.Index)
			}
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Name != "" {
				tc.Name = d.Name
			}
			tc.Arguments += d.Arguments
		}
	}
	var out []ToolCall
	for _, ix := range order {
		out = append(out, *byIndex[ix])
	}
	return out
}

// BenchmarkAccumulateNewIndexEveryChunk is a hostile upstream's stream: a new tool-call
// index in every chunk. ns/op per chunk stays flat as the stream grows (it grew with the
// number of calls before the accumulator indexed them).
func BenchmarkAccumulateNewIndexEveryChunk(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		chunks := make([]Chunk, n)
		for i := range chunks {
			chunks[i] = Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: i, Arguments: "{}"}}}
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var a accumulator
				for i := range chunks {
					a.add(&chunks[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/chunk")
		})
	}
}
