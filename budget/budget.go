package budget

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmclient/llmclient/pricing"
)

// Budget caps what a Client's calls may spend in each window. Register it with
// llmclient.WithBudget; New validates it. A Budget is a plain value: the Client copies it.
type Budget struct {
	// Name identifies the budget in events, errors and its store; required, unique within
	// a Client. Clients that share a store (redisstore) and name a budget alike share it,
	// so they must give it the same Window, Cap and Soft.
	Name string
	// Scope says which attempts the budget counts. The zero Scope counts every attempt of
	// the Client.
	Scope Scope
	// Window is the period the cap applies to. The zero Window is Daily(time.UTC).
	Window Window
	// Cap is the hard cap per window; it must be positive. An attempt whose reservation
	// does not fit under it is refused (or rerouted, see Reroute) before any call; an
	// attempt whose estimate alone exceeds the cap can never run under this budget.
	Cap pricing.Money
	// Soft are fractions of Cap, each in (0, 1), at most MaxSoft of them, at which the
	// Client emits an llmclient.EventBudget when the window's spend first reaches them:
	// once per window, across every Client that shares the budget's store. Fractions are
	// read to a millionth. Default none.
	Soft []float64
	// Reroute names a model group (llmclient.WithModelGroup) a refused call moves to, in
	// place of the rest of its route, instead of ending with ClassBudgetExceeded: the
	// economy model. The rerouted attempts are still counted by this budget, but it admits
	// them past its cap; other budgets still apply to them. Default "": refuse.
	Reroute string
	// Unpriced says what the budget does with an attempt whose model has no price.
	// Default UnpricedRefuse. A Transport request of a priced shape whose body is too
	// large to read is priced from its answer instead (see llmclient.WithPassUnpriced).
	Unpriced Unpriced
	// UnpricedCost is what UnpricedCharge reserves and counts for each such attempt; it
	// must be positive with UnpricedCharge and zero otherwise.
	UnpricedCost pricing.Money
}

// MaxSoft bounds the number of soft thresholds of one budget.
const MaxSoft = 8

// Unpriced is what a budget does with an attempt it cannot price: no price for its model
// in the Client's table or in the upstream's own prices.
type Unpriced uint8

const (
	// UnpricedRefuse refuses the attempt, before any call, with llmclient.ClassUnpriced
	// (not ClassBudgetExceeded: no money was spent, a model without a price was called)
	// and an error wrapping ErrNoPrice that names the model: a budget that cannot count a
	// call does not let it through unnoticed. The call fails over, by default, to an
	// upstream that prices it. Price the model (llmclient.Upstream.Prices, or a newer
	// price file) or choose another policy.
	UnpricedRefuse Unpriced = iota
	// UnpricedAllow admits the attempt and counts nothing for it: the budget then does not
	// bound what such calls spend.
	UnpricedAllow
	// UnpricedCharge admits the attempt as if it cost UnpricedCost, reserved and counted
	// like a priced one (unless its response names a model that has a price): an error
	// response (status 400 and above, no usage), which vendors do not bill, counts a known
	// $0, as it does for a priced model.
	UnpricedCharge
)

// String returns "refuse", "allow" or "charge".
func (u Unpriced) String() string {
	switch u {
	case UnpricedRefuse:
		return "refuse"
	case UnpricedAllow:
		return "allow"
	case UnpricedCharge:
		return "charge"
	}
	return fmt.Sprintf("Unpriced(%d)", uint8(u))
}

// ScopeKind says what a budget counts.
type ScopeKind uint8

const (
	// ScopeClient counts every attempt of the Client.
	ScopeClient ScopeKind = iota
	// ScopePartition counts the attempts of calls in a caller partition (a team, a
	// tenant); calls in no partition are not counted.
	ScopePartition
	// ScopeUpstream counts the attempts on one upstream.
	ScopeUpstream
	// ScopeModel counts the attempts whose upstream model (the name sent to the
	// upstream, after Upstream.Models) is Name.
	ScopeModel
)

// Scope says which attempts a budget counts.
type Scope struct {
	Kind ScopeKind
	// Name is, for ScopeUpstream, the upstream's name and, for ScopeModel, the model's,
	// both required. For ScopePartition it names the one partition counted; "" gives every
	// partition a budget of its own, with the same cap.
	Name string
	// MetadataKey is, for ScopePartition, the Request.Metadata key that names a call's
	// partition; "" uses the call's caller partition (llmclient.WithPartitionLimits' key,
	// else llmclient.WithPartition on the context).
	MetadataKey string
}

// Client returns the scope of every attempt of the Client: the zero Scope.
func Client() Scope { return Scope{} }

// Partition returns the scope of one caller partition, named by the call's partition
// (see Scope.MetadataKey).
func Partition(name string) Scope { return Scope{Kind: ScopePartition, Name: name} }

// EachPartition returns a scope that gives each partition named by the request's
// Metadata[metadataKey] (the call's partition when metadataKey is "") a budget of its own.
func EachPartition(metadataKey string) Scope {
	return Scope{Kind: ScopePartition, MetadataKey: metadataKey}
}

// Upstream returns the scope of one upstream's attempts.
func Upstream(name string) Scope { return Scope{Kind: ScopeUpstream, Name: name} }

// Model returns the scope of the attempts that call the upstream model name.
func Model(name string) Scope { return Scope{Kind: ScopeModel, Name: name} }

// String describes the scope: "client", "partition \"a\"", "each partition", "upstream
// \"x\"", "model \"m\"".
func (s Scope) String() string {
	switch s.Kind {
	case ScopeClient:
		return "client"
	case ScopePartition:
		if s.Name == "" {
			return "each partition"
		}
		return fmt.Sprintf("partition %q", s.Name)
	case ScopeUpstream:
		return fmt.Sprintf("upstream %q", s.Name)
	case ScopeModel:
		return fmt.Sprintf("model %q", s.Name)
	}
	return fmt.Sprintf("ScopeKind(%d)", uint8(s.Kind))
}

// Validate reports every problem of b's own fields at once; the Client also checks that
// Reroute and an upstream scope name what it has. It never panics.
func (b *Budget) Validate() error {
	var errs []error
	if b.Name == "" {
		errs = append(errs, errors.New("Name is empty"))
	}
	switch b.Scope.Kind {
	case ScopeClient:
		if b.Scope.Name != "" || b.Scope.MetadataKey != "" {
			errs = append(errs, errors.New("a client scope takes no Name or MetadataKey"))
		}
	case ScopePartition:
	case ScopeUpstream, ScopeModel:
		if b.Scope.Name == "" {
			errs = append(errs, fmt.Errorf("%v scope needs a Name", kindName(b.Scope.Kind)))
		}
		if b.Scope.MetadataKey != "" {
			errs = append(errs, fmt.Errorf("%v scope takes no MetadataKey", kindName(b.Scope.Kind)))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown scope kind %d", b.Scope.Kind))
	}
	if err := b.Window.validate(); err != nil {
		errs = append(errs, err)
	}
	if b.Cap <= 0 {
		errs = append(errs, fmt.Errorf("Cap %v must be positive", b.Cap))
	}
	if len(b.Soft) > MaxSoft {
		errs = append(errs, fmt.Errorf("%d soft thresholds, at most %d", len(b.Soft), MaxSoft))
	}
	seen := map[int64]bool{}
	for _, f := range b.Soft {
		if !(f > 0 && f < 1) { // NaN fails too
			errs = append(errs, fmt.Errorf("soft fraction %v is outside (0, 1)", f))
			continue
		}
		if ppm := toPPM(f); seen[ppm] {
			errs = append(errs, fmt.Errorf("soft fraction %v appears twice (to a millionth)", f))
		} else {
			seen[ppm] = true
		}
	}
	switch b.Unpriced {
	case UnpricedRefuse, UnpricedAllow:
		if b.UnpricedCost != 0 {
			errs = append(errs, fmt.Errorf("UnpricedCost %v is set but Unpriced is %v", b.UnpricedCost, b.Unpriced))
		}
	case UnpricedCharge:
		if b.UnpricedCost <= 0 {
			errs = append(errs, fmt.Errorf("UnpricedCharge needs a positive UnpricedCost, got %v", b.UnpricedCost))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown Unpriced policy %d", b.Unpriced))
	}
	if len(errs) == 0 {
		return nil
	}
	name := b.Name
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Errorf("budget %q: %w", name, errors.Join(errs...))
}

func kindName(k ScopeKind) string {
	switch k {
	case ScopeUpstream:
		return "an upstream"
	case ScopeModel:
		return "a model"
	}
	return "this"
}

// Thresholds returns the soft thresholds as amounts of Cap, ascending, each at least one
// picodollar: Cap × fraction, the fraction read to a millionth, rounded down. Fractions
// Validate would reject are left out.
func (b *Budget) Thresholds() []pricing.Money {
	out := make([]pricing.Money, 0, len(b.Soft))
	for _, f := range b.Soft {
		if !(f > 0 && f < 1) || b.Cap <= 0 {
			continue
		}
		out = append(out, max(fraction(b.Cap, toPPM(f)), 1))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// toPPM returns f in millionths, rounded to the nearest, for f in (0, 1).
func toPPM(f float64) int64 { return int64(math.Round(f * 1e6)) }

// fraction returns m × ppm / 1e6 for m ≥ 0 and ppm in [0, 1e6], rounded down, without
// overflow.
func fraction(m pricing.Money, ppm int64) pricing.Money {
	return pricing.Money(int64(m)/1e6*ppm + int64(m)%1e6*ppm/1e6)
}

// FractionOf returns which fraction of the threshold list a threshold amount is, for
// events: the Soft entry whose amount it is, else amount / Cap.
func (b *Budget) FractionOf(amount pricing.Money) float64 {
	for _, f := range b.Soft {
		if f > 0 && f < 1 && max(fraction(b.Cap, toPPM(f)), 1) == amount {
			return f
		}
	}
	if b.Cap <= 0 {
		return 0
	}
	return float64(amount) / float64(b.Cap)
}
