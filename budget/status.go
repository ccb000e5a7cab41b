package budget

import (
	"errors"
	"time"

	"github.com/llmclient/llmclient/pricing"
)

// Errors of budget decisions, wrapped by the *llmclient.Error of a refused attempt; match
// them with errors.Is.
var (
	// ErrExceeded: the attempt's reservation did not fit under a budget's cap in its
	// window (class budget_exceeded). Error.AdmitAfter says when the window's spend will
	// have left room for it, 0 when it never will (its estimate exceeds the cap).
	ErrExceeded = errors.New("llmclient: budget exceeded")
	// ErrNoPrice: a budget with UnpricedRefuse could not price the attempt's model (class
	// unpriced).
	ErrNoPrice = errors.New("llmclient: no price for the model")
	// ErrCostlyFailover: a Failover rule refused to move the call to a costlier upstream
	// (class unavailable).
	ErrCostlyFailover = errors.New("llmclient: failover to a costlier upstream refused")
)

// Status is a budget's state as an llmclient.EventBudget reports it.
type Status struct {
	// Name is the budget's; Partition the partition whose budget it is, for a scope of
	// each partition.
	Name, Partition string
	// Cap, Spent and Reserved are the window's cap, what its attempts have cost, and what
	// attempts in flight hold reserved, across every Client that shares the budget.
	Cap, Spent, Reserved pricing.Money
	// Fraction is the soft fraction that was reached, or 1 for the hard cap. In
	// llmclient.Client.Budget's answer it is the largest soft fraction the window's spend
	// has reached (0 for none), or 1 while Hard.
	Fraction float64
	// Hard is, in an EventBudget, true when an attempt was refused at the cap: the first
	// refusal of the window (of the epoch, for a rolling window) across the Clients that
	// share the budget. In llmclient.Client.Budget's answer it is true while the budget
	// refuses calls at its cap.
	Hard bool
	// Reroute is the model group a refused call moves to, for a budget with Reroute.
	Reroute string
	// Start and End bound the window (for a rolling window, the slices it counts now).
	Start, End time.Time
}
