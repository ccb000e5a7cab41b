package llmclient

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// nonNegative is max(v, 0) wherever max gives a number: negative zero included.
func TestNonNegativeIsMaxWithZero(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1e-300, -1e-300, 3, -3, math.MaxFloat64, -math.MaxFloat64,
		math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64} {
		got, want := nonNegative(v), max(v, 0)
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("nonNegative(%v) = %v (sign %v), want %v", v, got, math.Signbit(got), want)
		}
	}
	if got := nonNegative(math.NaN()); got != 0 {
		t.Errorf("nonNegative(NaN) = %v, want 0", got)
	}
}

// outputFitOracle is outputFit.add's arithmetic with the float max, as it was written
// before nonNegative: the oracle TestOutputFitAddKeepsItsArithmetic holds add to.
type outputFitOracle struct {
	w, o, d, oo, od, dd, peak          float64
	at                                 int64
	intercept, slope, deviation, reach float64
}

func (f *outputFitOracle) add(out int, d time.Duration, now int64) {
	o, x := float64(min(max(out, 0), maxCost)), float64(min(max(d, 0), maxService))
	if k := staleness(f.at, now); k < 1 {
		f.d, f.od, f.dd = f.d*k, f.od*k, f.dd*k*k
	}
	f.at = now
	f.w = f.w*outputForget + 1
	f.o = f.o*outputForget + o
	f.d = f.d*outputForget + x
	f.oo = f.oo*outputForget + o*o
	f.od = f.od*outputForget + o*x
	f.dd = f.dd*outputForget + x*x
	mo, md := f.o/f.w, f.d/f.w
	varO := max(f.oo/f.w-mo*mo, 0)
	varD := max(f.dd/f.w-md*md, 0)
	var slope, intercept float64
	if mo > 0 && math.Sqrt(varO) >= mo/20 {
		slope = max((f.od/f.w-mo*md)/varO, 0)
		intercept = max(md-slope*mo, 0)
	} else if mo > 0 {
		slope = md / mo
	} else {
		intercept = md
	}
	resid := max(varD-slope*slope*varO, 0)
	if math.IsNaN(resid) || math.IsInf(resid, 0) {
		resid = 0
	}
	f.intercept, f.slope, f.deviation = intercept, slope, math.Sqrt(resid)
	if p := f.peak - (f.peak-mo)/256; p > o {
		f.peak = p
	} else {
		f.peak = o
	}
	f.reach = 2 * max(f.peak, 1)
}

// outputFit.add publishes, bit for bit, what its arithmetic with the float max gives, for
// outputs and durations alike and apart, zero, huge and negative, with pauses between.
func TestOutputFitAddKeepsItsArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for run := range 200 {
		var f outputFit
		var o outputFitOracle
		now := int64(1e18)
		for i := range 60 {
			out := rng.IntN(5000)
			d := time.Duration(rng.Int64N(int64(time.Minute)))
			switch rng.IntN(8) {
			case 0:
				out = 0
			case 1:
				out = 100 // alike outputs: no slope to tell
			case 2:
				d = 0
			case 3:
				out, d = -5, -time.Second
			case 4:
				out, d = math.MaxInt, 2*time.Hour
			case 5:
				now += int64(rng.Int64N(int64(time.Minute))) // a pause: the sums decay
			}
			now += int64(time.Millisecond)
			f.add(out, d, now)
			o.add(out, d, now)
			got := [4]uint64{f.intercept.Load(), f.slope.Load(), f.deviation.Load(), f.reach.Load()}
			want := [4]uint64{math.Float64bits(o.intercept), math.Float64bits(o.slope), math.Float64bits(o.deviation),
				math.Float64bits(o.reach)}
			if got != want {
				t.Fatalf("run %d, call %d (out %d, d %v): published %x, want %x", run, i, out, d, got, want)
			}
		}
	}
}

// serviceTime.add returns the estimate expect reads right after it, which serviceKind.add
// raises the slowest estimate with.
func TestServiceTimeAddReturnsTheEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var s serviceTime
	now := int64(1e18)
	for i := range 2000 {
		if rng.IntN(10) == 0 {
			now += int64(rng.Int64N(int64(time.Minute))) // a pause: the state decays
		}
		now += int64(time.Millisecond)
		d := time.Duration(rng.Int64N(int64(10 * time.Second)))
		lower := rng.IntN(4) == 0
		e := s.add(d, lower, now)
		if full, _ := s.expect(now); e != full {
			t.Fatalf("call %d (d %v, lower bound %v): add returned %v, expect reads %v", i, d, lower, e, full)
		}
	}
}

// outputFit.expect gives what its arithmetic with the float min gives.
func TestOutputFitExpectKeepsItsArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	var f outputFit
	now := int64(1e18)
	for i := range 500 {
		now += int64(rng.Int64N(int64(2 * time.Second)))
		f.add(rng.IntN(3000), time.Duration(rng.Int64N(int64(time.Minute))), now)
		for _, out := range []int{-1, 0, 1, rng.IntN(100_000), math.MaxInt} {
			later := now + int64(rng.Int64N(int64(time.Minute)))
			gotFull, gotStale := f.expect(out, later)
			a, b := math.Float64frombits(f.intercept.Load()), math.Float64frombits(f.slope.Load())
			sd := math.Float64frombits(f.deviation.Load())
			o := min(float64(min(max(out, 0), maxCost)), math.Float64frombits(f.reach.Load()))
			full := time.Duration(min(math.Ceil(a+b*o+4*sd), float64(maxService)))
			if i < outputMinCalls-1 {
				full = 0
			}
			stale := decayed(full, staleness(f.at.Load(), later))
			if gotFull != full || gotStale != stale {
				t.Fatalf("call %d, out %d: expect = %v, %v, want %v, %v", i, out, gotFull, gotStale, full, stale)
			}
		}
	}
}
