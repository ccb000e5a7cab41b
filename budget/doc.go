// Package budget describes spend caps for an llmclient.Client: how much money calls may
// spend, over which window, on what, and what happens at the cap. The Client enforces
// them (llmclient.WithBudget); this package holds their configuration, the window
// arithmetic, and what the Client reports about them.
//
//	daily := budget.Budget{
//		Name:   "daily",
//		Window: budget.Daily(paris),       // calendar days in Europe/Paris
//		Cap:    200 * pricing.Dollar,       // hard cap per day
//		Soft:   []float64{0.8},             // EventBudget once a day at 80%
//	}
//	flagship := budget.Budget{
//		Name:    "flagship",
//		Scope:   budget.Upstream("gpt-4o"), // only what that upstream spends
//		Window:  budget.Rolling(time.Hour),
//		Cap:     20 * pricing.Dollar,
//		Reroute: "economy",                  // at the cap, calls move to this model group
//	}
//
// # How the Client enforces a budget
//
// Each attempt reserves, in every budget that counts it, the estimated cost of its
// request on the upstream it is about to call: the prompt's estimate plus the largest
// output the request allows (MaxTokens, else llmclient.WithReservedOutput), at that
// upstream's price for the model. A reservation that does not fit under the cap, beside
// what the window has spent and what other calls hold reserved, is refused before any
// call is made. When the attempt ends, its reservation is replaced by what it really cost:
// the reported usage at the model's price. Failed attempts that the vendor may still bill
// (a timeout after the request was sent) keep their reservation as their cost. Because
// admission is one atomic check-and-reserve in the store, Clients that share a store
// (redisstore) share the cap: together they overspend it only by what calls in flight
// cost beyond their reservations.
//
// An attempt's cost counts in the window when the attempt ends: in the slice it is
// settled in, whichever slice it reserved in. A call longer than a rolling window, or one
// that runs past a calendar window's end, is counted in the window it ends in, never
// nowhere.
//
// # How far spend can pass the cap
//
// Over any window (for a rolling window, the slices it counts), the cost of the attempts
// settled in it is at most Cap plus:
//
//   - what attempts cost beyond their reservations: usage above the estimate (a prompt
//     the estimator undercounted, an upstream that ignores MaxTokens);
//   - the cost of attempts that were in flight for longer than the window less one slice
//     (for a calendar window: that began in an earlier window): their reservation left
//     the window before they ended, so other calls were admitted in its place;
//   - what calls a budget's Reroute admits past its cap cost.
//
// A timeout or cancellation after the request was sent counts its estimated cost (the
// prompt, plus for a one-shot call the largest output allowed), an attempt whose cost is
// unknown counts its reservation, and an attempt that made no call counts nothing. Each attempt is settled once, in every budget
// that counts it: a hedge is an attempt of its own, an answer served from a cache or
// shared by de-duplication made no attempt and counts nothing, and a dedup follower's
// Response.Cost is the leader's call, counted once.
//
// A budget's state lives behind the Client's limit store (llmclient.WithLimitStore) when
// that store implements limitstore.BudgetStore, as the in-memory store and redisstore's
// do; otherwise in memory, private to the Client.
package budget
