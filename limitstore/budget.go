package limitstore

import (
	"context"
	"time"
)

// BudgetStore is an optional capability of a Store: keeping the spend of llmclient's
// budgets (llmclient.WithBudget). A Client whose limit store implements it keeps its
// budgets there, so Clients that share the store share their budgets; otherwise it keeps
// them in memory, private to it. The Store of NewMemory implements it, and so does
// redisstore's.
type BudgetStore interface {
	// OpenBudget returns the ledger of the budget called name, creating it on first use.
	// Ledgers with the same name share their counters, so every caller must open a name
	// with the same spec. Like Open, it must not block.
	OpenBudget(name string, spec BudgetSpec) Ledger
}

// BudgetSpec is what a budget enforces, in the caller's unit of money (llmclient counts
// picodollars).
type BudgetSpec struct {
	// Cap is the most a window may hold, spent and reserved together; positive.
	Cap int64
	// Soft are thresholds of spend, ascending, each in (0, Cap]; at most 16.
	Soft []int64
}

// BudgetPeriod is where the caller's clock puts now in the budget's window (see
// budget.Window.PeriodAt): the window is the slices Oldest to Slice; a calendar window is
// one slice. Slice ids grow with time.
type BudgetPeriod struct {
	Slice, Oldest int64
	// Epoch changes once per window; soft thresholds and the hard cap fire at most once
	// per epoch. An epoch older than the one the store last saw is taken as that one.
	Epoch int64
	// TTL is how long from now the current slice stays in the window: the store may
	// forget a key's counters once its last TTL has passed.
	TTL time.Duration
}

// BudgetResult is a ledger's answer.
type BudgetResult struct {
	// OK reports that a reservation was taken (always true for Settle).
	OK bool
	// Spent and Reserved are the window's totals after the operation: what its attempts
	// cost, and what attempts in flight hold reserved.
	Spent, Reserved int64
	// Fired has bit i set when the window's spend reached Soft[i] for the first time in
	// the epoch with this operation.
	Fired uint32
	// FiredHard is true for the first refused reservation of the epoch.
	FiredHard bool
	// FreeAfter is, for a refused reservation, the slice after whose departure from the
	// window the reservation would fit (the current one for a calendar window), if Never
	// is false. Never is true when the amount exceeds the cap: no window fits it.
	FreeAfter int64
	Never     bool
}

// QuickLedger is an optional capability of a Ledger kept in this process's memory, as the
// ledgers of NewLedger and of NewMemory's OpenBudget are: the common cases of Reserve and
// Settle for the key "" (a budget that does not count partitions apart), without the
// context and the error, which such a ledger never uses, for callers on a hot path. Both
// ignore the period's TTL: such a ledger forgets keys by the periods callers pass and
// reads no clock, so callers may leave it unset.
type QuickLedger interface {
	Ledger
	// ReserveQuick does what Reserve does for the key "" when the reservation is taken, and
	// reports whether it was; when it was not, it has done nothing, and Reserve gives the
	// refusal (or, if room was made meanwhile, takes the reservation).
	ReserveQuick(p BudgetPeriod, amount int64, over bool) bool
	// SettleQuick is Settle for the key "".
	SettleQuick(p BudgetPeriod, slice, reserved, spent int64) BudgetResult
}

// Ledger is one budget's counters: for each key (one per partition of a budget that
// counts each partition apart, else the empty key) the spend and reservations of the
// slices of its window. Every method is atomic with respect to the others, in every
// process that shares the ledger. Amounts below 0 count as 0; totals saturate at
// math.MaxInt64. Implementations must be safe for concurrent use and must not block
// beyond the store's own round trip, bounded by ctx.Deadline() as State's is.
type Ledger interface {
	// Reserve takes amount in slice p.Slice of key when the window's spent and reserved
	// totals leave room for it under the cap, or unconditionally when over is true (a
	// call the budget admits past its cap). A refused reservation takes nothing.
	Reserve(ctx context.Context, key string, p BudgetPeriod, amount int64, over bool) (BudgetResult, error)
	// Settle ends a reservation of reserved made in slice: it gives the reservation back
	// and counts spent in that slice (nothing, when the slice has left the window), then
	// reports the soft thresholds the window's spend reached.
	Settle(ctx context.Context, key string, p BudgetPeriod, slice, reserved, spent int64) (BudgetResult, error)
}
